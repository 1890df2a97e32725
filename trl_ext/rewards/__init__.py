"""Verifiable rewards following TRL's protocol ``f(completions, **columns) -> list[float | None]``.

Every reward is a picklable callable class with a ready instance; all accept plain-text and conversational
completions. Math uses math-verify in killable worker processes; code runs in ``trl_ext.sandbox``.
"""

from __future__ import annotations

from trl_ext.rewards.base import RewardFunction
from trl_ext.rewards.code import AsyncCodeTests, CodeTests, code_tests, code_tests_async
from trl_ext.rewards.format import (
    BoxedFormat,
    CodeBlockFormat,
    GatedReward,
    ThinkFormat,
    boxed_format,
    code_block_format,
    magistral_code_reward,
    magistral_math_reward,
    think_format,
)
from trl_ext.rewards.length import OverlongPenalty, overlong_penalty
from trl_ext.rewards.math import MathAccuracy, math_accuracy

__all__ = [
    "AsyncCodeTests",
    "BoxedFormat",
    "CodeBlockFormat",
    "CodeTests",
    "GatedReward",
    "MathAccuracy",
    "OverlongPenalty",
    "RewardFunction",
    "ThinkFormat",
    "boxed_format",
    "code_block_format",
    "code_tests",
    "code_tests_async",
    "magistral_code_reward",
    "magistral_math_reward",
    "math_accuracy",
    "overlong_penalty",
    "think_format",
]
