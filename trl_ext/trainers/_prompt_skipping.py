"""GRESO-style prompt skipping for dynamic sampling (arXiv 2506.02177): per-prompt history and skip decisions.

Everything here is identical on every process: the history is updated from the GATHERED outcomes of each round, and
a skip decision is a pure function of (seed, step, prompt, history) — a hash, not a random generator — so processes
that see different prompts never drift apart and a resumed run makes exactly the decisions of the uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch

from trl_ext.core.prompt_skipping import greso_adjust_exploration, greso_skip_probability


def prompt_key(prompt: Any) -> str:
    """A stable identity for a prompt (text or conversation), the same in every process and every run."""
    text = json.dumps(prompt, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _uniform(seed: int, step: int, key: str) -> float:
    digest = hashlib.blake2b(f"{seed}:{step}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class PromptSkipper:
    """Per-prompt zero-variance streaks, the exploration probability p_e and the skip decisions."""

    def __init__(self, target_informative_rate: float, exploration: float, min_rollout: float, seed: int):
        self.target_zero_variance_rate = 1.0 - target_informative_rate
        self.exploration = exploration
        self.min_rollout = min_rollout
        self.seed = seed
        self.streaks: dict[str, int] = {}
        self._rolled_out = self._zero_variance = 0

    def should_skip(self, key: str, step: int) -> bool:
        streak = self.streaks.get(key, 0)
        if streak == 0:
            return False
        probability = float(greso_skip_probability(torch.tensor([streak]), self.exploration, self.min_rollout)[0])
        return _uniform(self.seed, step, key) < probability

    def record(self, keys: list[str], informative: list[bool]) -> None:
        """The gathered outcome of one round: each rolled-out prompt and whether its group was informative."""
        for key, ok in zip(keys, informative, strict=True):
            self.streaks[key] = 0 if ok else self.streaks.get(key, 0) + 1
        self._rolled_out += len(keys)
        self._zero_variance += len(keys) - sum(informative)

    def adjust(self) -> None:
        """Once per generation batch: move p_e towards the target zero-variance rate (GRESO §4)."""
        if self._rolled_out:
            rate = self._zero_variance / self._rolled_out
            self.exploration = greso_adjust_exploration(self.exploration, rate, self.target_zero_variance_rate)
        self._rolled_out = self._zero_variance = 0

    def state_dict(self) -> dict:
        return {"exploration": self.exploration, "streaks": self.streaks}

    def load_state_dict(self, state: dict) -> None:
        self.exploration = float(state["exploration"])
        self.streaks = {key: int(value) for key, value in state["streaks"].items()}
