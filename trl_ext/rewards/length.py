"""Length shaping as a reward function, on ``trl_ext.core.shaping.overlong_penalty``."""

from __future__ import annotations

from typing import Any

from trl_ext.rewards.base import RewardFunction


def _penalty(lengths: list[int], max_length: int, cache_length: int, max_penalty: float) -> list[float]:
    import torch  # here, so that `import trl_ext.rewards` (and every math worker) stays free of torch

    from trl_ext.core.shaping import overlong_penalty as core_overlong_penalty

    lengths_t = torch.tensor(lengths, dtype=torch.float64)
    return [float(p) for p in core_overlong_penalty(lengths_t, max_length, cache_length, max_penalty)]


class OverlongPenalty(RewardFunction):
    """DAPO's soft overlong punishment (arXiv 2503.14476 Eq. 13) scaled by ``max_penalty`` (Magistral's
    length penalty uses 0.1), computed from the completion token ids TRL passes as ``completion_ids``.

    0 up to ``max_length - cache_length`` tokens, then a linear ramp down to ``-max_penalty`` at
    ``max_length``, and ``-max_penalty`` beyond. The formula lives in ``trl_ext.core.shaping``.
    """

    name = "overlong_penalty"
    trl_ext_shaping = True  # a shaping term: never part of the dynamic-sampling filter (grpo.is_shaping_reward)

    def __init__(self, max_length: int, cache_length: int, max_penalty: float = 1.0, name: str | None = None) -> None:
        super().__init__(name)
        _penalty([0], max_length, cache_length, max_penalty)  # validates the arguments
        self.max_length, self.cache_length, self.max_penalty = max_length, cache_length, max_penalty

    def __call__(self, completions: list, completion_ids: list | None = None, **kwargs: Any) -> list[float]:
        if completion_ids is None:
            raise ValueError(
                f"{self.__name__} needs `completion_ids` (the token ids of each completion); GRPOTrainer passes "
                "them automatically, pass them yourself when calling it directly."
            )
        if len(completion_ids) != len(completions):
            raise ValueError(
                f"{self.__name__}: {len(completion_ids)} `completion_ids` rows for {len(completions)} completions."
            )
        lengths = [len(ids) for ids in completion_ids]
        return _penalty(lengths, self.max_length, self.cache_length, self.max_penalty)


def overlong_penalty(max_length: int, cache_length: int, max_penalty: float = 1.0) -> OverlongPenalty:
    """A reward function applying DAPO's soft overlong punishment; see ``OverlongPenalty``."""
    return OverlongPenalty(max_length, cache_length, max_penalty)
