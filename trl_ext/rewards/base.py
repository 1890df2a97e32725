"""Base class of the trl_ext reward functions."""

from __future__ import annotations

from typing import Any


class RewardFunction:
    """A picklable callable following TRL's reward protocol ``f(completions, **columns) -> list[float | None]``.

    Instances carry ``__name__`` (TRL names the reward column after it); subclasses set ``name`` and may keep
    unpicklable runtime state (pools, locks) in attributes listed in ``_transient``, rebuilt lazily.
    """

    name = "reward"
    _transient: tuple[str, ...] = ()

    def __init__(self, name: str | None = None) -> None:
        self.__name__ = name or self.name

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in self._transient:
            state[key] = None
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.__name__!r})"
