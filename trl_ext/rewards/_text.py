"""Text helpers shared by the reward functions: completion content, answer region, \\boxed{} and code blocks."""

from __future__ import annotations

import re
from typing import Any

from trl_ext.rewards._math_answers import boxed_spans

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def completion_text(completion: Any, index: int) -> str:
    """The text of one completion: a plain string, or the content of the last assistant message of a
    conversational completion (a list of {"role", "content"} dicts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        for message in reversed(completion):
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):  # multimodal content blocks
                    return "".join(b.get("text", "") for b in content if isinstance(b, dict))
                return ""
        return ""
    raise ValueError(
        f"completion {index}: expected a string or a list of {{'role', 'content'}} messages, "
        f"got {type(completion).__name__}."
    )


def answer_region(text: str, open_tag: str | None = THINK_OPEN, close_tag: str | None = THINK_CLOSE) -> str | None:
    """The part of ``text`` that is scored: after the last ``close_tag`` when present. A reasoning block that
    was opened but never closed has no answer (None). With ``close_tag=None`` the whole text is scored."""
    if not close_tag:
        return text
    head, sep, tail = text.rpartition(close_tag)
    if sep:
        return tail
    if open_tag and open_tag in text:
        return None
    return text


def last_boxed(text: str) -> str | None:
    """Content of the last brace-balanced ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``; None if absent or
    unbalanced."""
    spans = boxed_spans(text)
    return text[spans[-1][0] : spans[-1][1]] if spans else None


def last_code_block(text: str) -> str | None:
    """Body of the last complete fenced (```) code block in ``text``, or None."""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else None


def column(kwargs: dict, names: tuple[str, ...], n: int, reward: str) -> list:
    """The first dataset column among ``names`` found in the reward kwargs, checked to hold ``n`` rows."""
    for name in names:
        if kwargs.get(name) is not None:
            values = list(kwargs[name])
            if len(values) != n:
                raise ValueError(f"{reward}: column `{name}` has {len(values)} rows but there are {n} completions.")
            return values
    raise ValueError(
        f"{reward} needs a dataset column named {' or '.join(f'`{c}`' for c in names)}; "
        f"the batch has {sorted(k for k in kwargs if k not in _TRL_KWARGS)}. Rename your column or pass it."
    )


def log_outcomes(reward: str, outcomes: list[str], names: tuple[str, ...], log_metric: Any) -> None:
    """Log the share of each outcome as ``<reward>/<outcome>`` through TRL's ``log_metric`` callback, if given."""
    if not callable(log_metric) or not outcomes:
        return
    for name in names:
        log_metric(f"{reward}/{name}", outcomes.count(name) / len(outcomes))


_TRL_KWARGS = {"prompts", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
