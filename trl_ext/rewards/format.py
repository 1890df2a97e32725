"""Format rewards (think tags, \\boxed{}, code block) and the Magistral gated reward."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trl_ext.rewards._text import THINK_CLOSE, THINK_OPEN, answer_region, completion_text, last_boxed, last_code_block
from trl_ext.rewards.base import RewardFunction
from trl_ext.rewards.code import code_tests
from trl_ext.rewards.math import math_accuracy


class _FormatReward(RewardFunction):
    """1.0 when ``check(text)`` holds, else 0.0 (values configurable)."""

    trl_ext_shaping = True  # a shaping term: never part of the dynamic-sampling filter (grpo.is_shaping_reward)

    def __init__(self, pass_value: float = 1.0, fail_value: float = 0.0, name: str | None = None) -> None:
        super().__init__(name)
        self.pass_value = pass_value
        self.fail_value = fail_value

    def check(self, text: str) -> bool:
        raise NotImplementedError

    def __call__(self, completions: list, **kwargs: Any) -> list[float]:
        return [
            self.pass_value if self.check(completion_text(c, i)) else self.fail_value
            for i, c in enumerate(completions)
        ]


class ThinkFormat(_FormatReward):
    """Exactly one reasoning block followed by a non-empty answer: ``<think>...</think>answer``.

    With ``require_open=False`` the opening tag may be absent (chat templates that put ``<think>`` in the
    generation prompt, as Qwen3 and DeepSeek-R1 do); it must still not appear twice.
    """

    name = "think_format"

    def __init__(
        self,
        open_tag: str = THINK_OPEN,
        close_tag: str = THINK_CLOSE,
        require_open: bool = True,
        pass_value: float = 1.0,
        fail_value: float = 0.0,
        name: str | None = None,
    ) -> None:
        super().__init__(pass_value, fail_value, name)
        self.open_tag, self.close_tag, self.require_open = open_tag, close_tag, require_open

    def check(self, text: str) -> bool:
        opens, closes = text.count(self.open_tag), text.count(self.close_tag)
        if closes != 1 or opens > 1 or (self.require_open and opens != 1):
            return False
        if opens == 1 and not text.lstrip().startswith(self.open_tag):
            return False
        reasoning, _, answer = text.partition(self.close_tag)
        return bool(answer.strip()) and bool(reasoning.replace(self.open_tag, "").strip())


class BoxedFormat(_FormatReward):
    """The answer region (after ``</think>``) holds a non-empty, brace-balanced ``\\boxed{}``."""

    name = "boxed_format"

    def __init__(self, think_tags: tuple[str, str] | None = (THINK_OPEN, THINK_CLOSE), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.think_tags = think_tags

    def check(self, text: str) -> bool:
        region = answer_region(text, *(self.think_tags or (None, None)))
        boxed = last_boxed(region) if region is not None else None
        return bool(boxed and boxed.strip())


class CodeBlockFormat(_FormatReward):
    """The answer region (after ``</think>``) holds a complete, non-empty fenced code block."""

    name = "code_block_format"

    def __init__(self, think_tags: tuple[str, str] | None = (THINK_OPEN, THINK_CLOSE), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.think_tags = think_tags

    def check(self, text: str) -> bool:
        region = answer_region(text, *(self.think_tags or (None, None)))
        block = last_code_block(region) if region is not None else None
        return bool(block and block.strip())


class GatedReward(RewardFunction):
    """Magistral's reward (arXiv 2506.10910 §2.2): 0 if any format check fails (the task reward is not even
    computed for that completion), else ``base + scale * task`` (0.1 + 0.9·correct by default).

    ``formats`` are reward functions scoring a pass > 0 (e.g. ``think_format``, ``boxed_format``);
    ``task`` returns the correctness in [0, 1] (``math_accuracy``, ``code_tests``), sync or async. A task
    score of None stays None. Always synchronous: an async task reward is driven to completion here.
    """

    name = "gated_reward"

    def __init__(
        self,
        task: Callable[..., Any],
        formats: Sequence[Callable[..., Any]],
        base: float = 0.1,
        scale: float = 0.9,
        name: str | None = None,
    ) -> None:
        super().__init__(name)
        if not formats:
            raise ValueError("GatedReward needs at least one format reward in `formats`.")
        self.task, self.formats, self.base, self.scale = task, list(formats), base, scale

    def __call__(self, completions: list, **kwargs: Any) -> list[float | None]:
        n = len(completions)
        passed = [True] * n
        for fmt in self.formats:
            passed = [p and s is not None and s > 0 for p, s in zip(passed, fmt(completions, **kwargs))]
        keep = [i for i in range(n) if passed[i]]
        scores: list[float | None] = [0.0] * n
        if not keep:
            return scores
        sub_kwargs = {k: _subset(v, keep, n) for k, v in kwargs.items()}
        task_scores = self.task([completions[i] for i in keep], **sub_kwargs)
        if inspect.isawaitable(task_scores):
            task_scores = _run_coroutine(task_scores)
        for i, score in zip(keep, task_scores):
            scores[i] = None if score is None else self.base + self.scale * score
        return scores


def _subset(value: Any, keep: list[int], n: int) -> Any:
    """Per-row columns are sliced to the kept rows; everything else (trainer_state, callbacks) passes as is."""
    if isinstance(value, (list, tuple)) and len(value) == n:
        return [value[i] for i in keep]
    return value


def _run_coroutine(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as executor:  # a loop is running in this thread: drive the coroutine elsewhere
        return executor.submit(asyncio.run, coro).result()


think_format = ThinkFormat()
boxed_format = BoxedFormat()
code_block_format = CodeBlockFormat()


magistral_math_reward = GatedReward(math_accuracy, [think_format, boxed_format], name="magistral_math_reward")
magistral_code_reward = GatedReward(code_tests, [think_format, code_block_format], name="magistral_code_reward")
