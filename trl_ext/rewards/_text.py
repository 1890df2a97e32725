"""Text helpers shared by the reward functions: completion content, answer region, \\boxed{} and code blocks."""

from __future__ import annotations

import functools
import re
from typing import Any

from trl_ext.rewards._math_answers import boxed_spans

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def completion_text(completion: Any, index: int) -> str:
    """The text of one completion: a plain string, or the content of the last assistant message of a
    conversational completion (a list of {"role", "content"} dicts; content a string or a list of text blocks).
    A message without readable text (content None, a block whose text is None, a block that is no text) gives
    "" for that part: the completion then has no answer; it never raises for a malformed message."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        for message in reversed(completion):
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                return _content_text(message.get("content"))
        return ""
    raise ValueError(
        f"completion {index}: expected a string or a list of {{'role', 'content'}} messages, "
        f"got {type(completion).__name__}."
    )


def _content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text of its text blocks (multimodal content)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""  # None (a tool-call-only message), a number, a dict: no text
    texts = []
    for block in content:
        text = block.get("text") if isinstance(block, dict) else block
        if isinstance(text, str):
            texts.append(text)
    return "".join(texts)


def answer_region(text: str, open_tag: str | None = THINK_OPEN, close_tag: str | None = THINK_CLOSE) -> str | None:
    """The part of ``text`` that is scored: the text outside every reasoning block. A reasoning block runs from
    ``open_tag`` (or from the start of the text when the first tag is a ``close_tag``: chat templates put the
    opening tag in the prompt) to the next ``close_tag``. A later ``close_tag`` that closes no block is dropped
    and the text on both sides of it stays in the answer (a stray tag cannot hide an answer written before it);
    a removed tag or block leaves a line break. A reasoning block opened but never closed leaves no answer
    (None). With ``close_tag=None`` the whole text is scored."""
    if not close_tag:
        return text
    first_close = text.find(close_tag)
    if first_close < 0:
        return None if open_tag and open_tag in text else text
    tail = text[first_close + len(close_tag) :]
    if close_tag not in tail and (not open_tag or open_tag not in close_tag):  # one closing tag: one block
        if open_tag and open_tag in tail:
            return None
        opened = text.find(open_tag, 0, first_close) if open_tag else -1
        if opened <= 0:
            return tail
        return f"{text[:opened]}\n{tail}" if tail else text[:opened]  # the text before <think> is shown too
    tags = _tag_pattern(open_tag, close_tag)
    kept, pos, inside = [], 0, False
    for number, tag in enumerate(tags.finditer(text)):
        is_close = tag.group() == close_tag
        if number == 0 and is_close:
            inside = True  # the text began inside a reasoning block
        if not inside:
            kept.append(text[pos : tag.start()])
            inside = not is_close  # an opening tag starts a block; a stray closing tag is dropped
        elif is_close:
            inside = False  # an opening tag inside a block is part of the reasoning
        pos = tag.end()
    if inside:
        return None
    kept.append(text[pos:])
    return "\n".join(piece for piece in kept if piece)  # a line break for a tag: "3</think>4" is not 34


@functools.lru_cache(maxsize=16)
def _tag_pattern(open_tag: str | None, close_tag: str) -> re.Pattern:
    tags = sorted(filter(None, {open_tag, close_tag}), key=len, reverse=True)  # the longer first: "</think>"
    return re.compile("|".join(re.escape(tag) for tag in tags))


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
