"""Math accuracy via math-verify, in a pool of killable worker processes (never hangs, thread-safe)."""

from __future__ import annotations

import importlib.util
import logging
import math
import numbers
import re
import sys
import threading
import warnings
from collections import OrderedDict
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from trl_ext.rewards._math_answers import (
    anchored_parts,
    answer_parts,
    fraction_verdict,
    gold_parts,
    unread_frame,
)
from trl_ext.rewards._pool import WorkerPool
from trl_ext.rewards._text import THINK_CLOSE, THINK_OPEN, answer_region, column, completion_text, log_outcomes
from trl_ext.rewards.base import RewardFunction

_WORKER_SOURCE = (
    # drop '' from sys.path: a math.py or code.py in the working directory must not shadow the stdlib
    "import sys\nsys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"
    + (Path(__file__).parent / "_math_worker.py").read_text()
)
_ANSWERS_PATH = str(Path(__file__).parent / "_math_answers.py")
_OUTCOMES = ("correct", "wrong", "no_answer", "timeout", "gold_error")
_WARNED_GOLDS: set[str] = set()
_POOLS: dict[int, WorkerPool] = {}
_POOLS_LOCK = threading.Lock()
_LOG = logging.getLogger(__name__)
# text written in a Python string without r"": "\\frac" became a form feed and "rac", "\\beta" a backspace and "eta"
# (a tab or newline may be meant: "\\times" and "\\neq" stay as they are)
# (a lone backslash before it was written to escape the command's own: "-\\\frac" is -\frac)
_PYTHON_ESCAPE = re.compile(r"(?:(?<!\\)\\)?([\a\b\v\f])(?=[a-z])")
_ESCAPED = {"\a": "\\a", "\b": "\\b", "\v": "\\v", "\f": "\\f"}


def shared_pool(num_workers: int) -> WorkerPool:
    """The process-wide math worker pool with ``num_workers`` workers (created on first use)."""
    if importlib.util.find_spec("math_verify") is None:
        raise ImportError(
            "MathAccuracy needs math-verify with its LaTeX parser: pip install 'math-verify[antlr4_13_2]'."
        )
    with _POOLS_LOCK:
        if num_workers not in _POOLS:
            argv = [sys.executable, "-c", _WORKER_SOURCE, _ANSWERS_PATH]
            # tasks queued per worker: it starts the next while this process reads its answer (several when they
            # are short: a decimal's verification takes about a millisecond)
            _POOLS[num_workers] = WorkerPool(argv, size=num_workers, pipeline=8)
        return _POOLS[num_workers]


def normalize_gold(gold: Any, ordered_lists: bool = False) -> tuple[tuple[str, ...], bool] | None:
    """(parts, ordered) to verify for a gold answer, or None when it is empty, not a string/number, or broken
    LaTeX (unbalanced braces).

    Every ``\\boxed{}`` of the gold is a required part (without a box the whole gold is the answer); a part
    that is a comma/"and"/"or" list, a written-out set ``\\{a, b\\}`` or ``a \\pm b`` is split further. The
    parts are a multiset (a part written twice is required twice), in order when ``ordered_lists``.
    Tuples, intervals and matrices stay whole. See ``trl_ext.rewards._math_answers``.
    """
    if isinstance(gold, str):  # the usual column: none of the number types below (their checks cost ~10 us a row)
        return gold_parts(_unescaped(gold), ordered_lists) if gold.strip() else None
    if gold is None or isinstance(gold, bool):
        return None
    gold = _exact_number(gold)
    if isinstance(gold, numbers.Integral) and not isinstance(gold, bool):
        gold = int(gold)  # numpy's integers (a pandas/Arrow column): not int subclasses
    elif isinstance(gold, numbers.Real):
        gold = float(gold)  # numpy's floats: repr(np.float64(0.5)) is 'np.float64(0.5)'
    if isinstance(gold, float) and not math.isfinite(gold):
        return None  # nan / inf: not an answer (math-verify would read "nan" as the product n*a*n)
    if isinstance(gold, float):
        gold = f"{Decimal(repr(gold)):f}"  # 1e-05 -> 0.00001 (math-verify reads "1e-05" as e - 5)
    elif isinstance(gold, int):
        gold = _safe_repr(gold)
        if gold is None:
            return None
    if not isinstance(gold, str) or not gold.strip():
        return None
    return gold_parts(_unescaped(gold), ordered_lists)


def _exact_number(gold: Any) -> Any:
    """A gold number that a float would change, written exactly: a ``Fraction`` as ``\\frac{p}{q}`` (``float()``
    overflows past 1e308), a ``Decimal`` (Arrow's decimal128) as its digits, a numpy float narrower than a double
    (float32, float16) as its own shortest digits (widened, ``np.float32(0.1)`` prints 0.10000000149011612)."""
    if isinstance(gold, numbers.Rational) and not isinstance(gold, numbers.Integral):
        sign = "-" if gold.numerator < 0 else ""
        numerator, denominator = _safe_repr(abs(gold.numerator)), _safe_repr(gold.denominator)
        if numerator is None or denominator is None:
            return None  # past 4,300 digits: not an answer (the row scores None, as for such an int)
        return f"{sign}\\frac{{{numerator}}}{{{denominator}}}"
    if isinstance(gold, Decimal):
        return f"{gold:f}" if gold.is_finite() else None
    numpy_float = type(gold).__module__ == "numpy" and isinstance(gold, numbers.Real) and not isinstance(gold, float)
    if numpy_float and not isinstance(gold, numbers.Integral) and math.isfinite(gold):
        return f"{Decimal(str(gold)):f}"  # str() of a numpy float is its shortest round-trip repr
    return gold


def _unescaped(text: str) -> str:
    """``text`` with the control characters a Python string made of LaTeX commands written back (``\\frac``)."""
    if not any(character in text for character in _ESCAPED):  # a scan per character: fast on long completions
        return text
    return _PYTHON_ESCAPE.sub(lambda match: _ESCAPED[match.group(1)], text)


def _safe_repr(value: Any) -> str | None:
    """``repr(value)``, or None where Python refuses it (an int of more than 4,300 digits raises ValueError)."""
    try:
        return repr(value)
    except ValueError:
        return None


def _is_numpy_bool(value: Any) -> bool:
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")  # numpy 2 names it "bool"


def _ordered_flags(column_values: Any, name: str, default: bool) -> list[bool]:
    """The ``ordered_lists`` column as booleans; a non-boolean row is an error (``bool("false")`` is True)."""
    flags = []
    for row, flag in enumerate(column_values):
        if flag is None or _is_numpy_bool(flag):  # a missing value (the reward's option); numpy's bool
            flag = default if flag is None else bool(flag)
        if not isinstance(flag, bool):
            raise ValueError(
                f"{name}: column `ordered_lists` row {row} is {flag!r} ({type(flag).__name__}); it must be a "
                "boolean (True: the row's list answer is ordered). Cast the column to bool in your dataset."
            )
        flags.append(flag)
    return flags


def _warn_gold(gold: Any) -> None:
    text = _safe_repr(gold) or f"<{type(gold).__name__} too long to print>"
    text = text if len(text) <= 200 else text[:200] + "..."
    if text in _WARNED_GOLDS or len(_WARNED_GOLDS) > 10_000:
        return
    _WARNED_GOLDS.add(text)
    warnings.warn(
        f"math_accuracy: the gold answer {text} is not a parseable answer (broken LaTeX, or nothing math-verify "
        "reads); its rows score None (TRL drops them). Give the final answer (e.g. in \\boxed{}) in the "
        "`solution`/`answer` column.",
        stacklevel=3,
    )


class MathAccuracy(RewardFunction):
    """Math answer correctness with math-verify (``trl_ext.rewards.math_accuracy`` is a ready instance).

    Gold comes from the ``solution`` column (or ``answer``), split into its required parts by ``normalize_gold``;
    a gold that is not an answer scores None (TRL then ignores the row) with one warning naming it. The
    completion is scored on its answer region only (the text outside every ``<think>...</think>`` block; an
    unclosed ``<think>`` has no answer) with strict, anchored extraction: ``extraction="boxed"`` takes every
    ``\\boxed{}`` of the region (several boxes are several parts), ``"anchored"`` also accepts, when there is no
    box, the complete answer of the last "answer is"/"Answer:" statement when it is the final answer (framing
    words before it, closing words after it, no earlier anchored answer that differs; see
    ``trl_ext.rewards._math_anchored``); never a number found anywhere in the text. Every gold part must be matched by its
    own answer part (see ``trl_ext.rewards._math_answers`` for what math-verify is not trusted with). Gold is
    always the first argument of ``verify``.

    Verification runs in ``num_workers`` persistent worker processes shared by all instances with the same
    count; each (gold, answer) pair has a hard ``timeout_s`` deadline after which its worker is killed and
    replaced and the pair scores ``timeout_value``. Identical pairs in one call are verified once. Safe to
    call from several threads at once. Under a trainer, the share of each outcome (correct, wrong, no_answer,
    timeout, gold_error) is logged as ``<name>/<outcome>`` through TRL's ``log_metric``.

    Args:
        correct_value / wrong_value: scores (DAPO uses 1 / -1).
        timeout_value: score when the deadline expires (``wrong_value`` by default, or None to drop the row).
        think_tags: (open, close) reasoning delimiters, or None to score the whole completion.
        ordered_lists: compare a bare list gold (``10, 4, -2``) in order (MATH's own grader does); by default
            a list is an unordered multiset. A boolean dataset column ``ordered_lists`` overrides it per row.
    """

    name = "math_accuracy"
    _transient = ("_gold_cache", "_gold_lock")

    def __init__(
        self,
        correct_value: float = 1.0,
        wrong_value: float = 0.0,
        timeout_value: float | None | Literal["wrong"] = "wrong",
        timeout_s: float = 5.0,
        extraction: Literal["boxed", "anchored"] = "boxed",
        think_tags: tuple[str, str] | None = (THINK_OPEN, THINK_CLOSE),
        num_workers: int = 2,
        name: str | None = None,
        ordered_lists: bool = False,
    ) -> None:
        super().__init__(name)
        if extraction not in ("boxed", "anchored"):
            raise ValueError(f'`extraction` must be "boxed" or "anchored", got {extraction!r}.')
        if timeout_s <= 0:
            raise ValueError(f"`timeout_s` must be > 0, got {timeout_s}.")
        if num_workers < 1:
            raise ValueError(f"`num_workers` must be >= 1, got {num_workers}.")
        self.correct_value = correct_value
        self.wrong_value = wrong_value
        self.timeout_value = wrong_value if timeout_value == "wrong" else timeout_value
        self.timeout_s = timeout_s
        self.extraction = extraction
        self.think_tags = think_tags
        self.num_workers = num_workers
        self.ordered_lists = ordered_lists
        self._gold_cache: OrderedDict | None = None
        self._gold_lock: threading.Lock | None = None

    @property
    def pool(self) -> WorkerPool:
        return shared_pool(self.num_workers)

    def _gold(self, gold: Any, ordered: bool) -> tuple[tuple[str, ...], bool] | None:
        if self._gold_lock is None:
            self._gold_lock = threading.Lock()
        key = (gold, ordered) if isinstance(gold, (str, int, float)) and not isinstance(gold, bool) else None
        with self._gold_lock:
            if self._gold_cache is None:
                self._gold_cache = OrderedDict()
            if key is not None and key in self._gold_cache:
                self._gold_cache.move_to_end(key)
                return self._gold_cache[key]
        normalized = normalize_gold(gold, ordered)
        if key is not None:
            with self._gold_lock:
                self._gold_cache[key] = normalized
                if len(self._gold_cache) > 8192:
                    self._gold_cache.popitem(last=False)
        return normalized

    def extract(self, text: str) -> tuple[str, ...] | str | None:
        """What is sent to the verifier for one completion: the parts of its boxed answer (every ``\\boxed{}`` of
        the answer region), for ``"anchored"`` extraction without a box the parts of the complete answer stated
        after the last anchor ("The final answer is $3$."), or None when it has no answer."""
        open_tag, close_tag = self.think_tags or (None, None)
        region = answer_region(text, open_tag, close_tag)
        if region is None:
            return None
        parts = answer_parts(region)
        if parts is None and self.extraction == "anchored" and not unread_frame(region):
            return anchored_parts(region)
        return parts

    def __call__(self, completions: list, **kwargs: Any) -> list[float | None]:
        golds = column(kwargs, ("solution", "answer"), len(completions), self.__name__)
        ordered = kwargs.get("ordered_lists")
        ordered = (
            [self.ordered_lists] * len(golds)
            if ordered is None
            else _ordered_flags(ordered, self.__name__, self.ordered_lists)
        )
        if len(ordered) != len(golds):
            raise ValueError(f"{self.__name__}: column `ordered_lists` has {len(ordered)} rows, not {len(golds)}.")
        keys: list[tuple | str | None] = []
        unique: dict[tuple, int] = {}
        raw_gold: dict[tuple, Any] = {}
        for i, (completion, gold) in enumerate(zip(completions, golds)):
            gold_norm = self._gold(gold, ordered[i])
            answer = self.extract(_unescaped(completion_text(completion, i)))
            if gold_norm is None:
                keys.append(None)
                _warn_gold(gold)
            elif answer is None:
                keys.append("no_answer")
            else:
                key = (*gold_norm, answer)
                unique.setdefault(key, len(unique))
                raw_gold.setdefault(key, gold)
                keys.append(key)
        answers: list[dict | None] = [None] * len(unique)
        to_verify = []  # pairs of plain integers/fractions are decided here: exact, no worker round trip
        for (gold_parts_, in_order, answer), index in unique.items():
            verdict = fraction_verdict(gold_parts_, answer, in_order) if isinstance(answer, tuple) else None
            if verdict is None:
                to_verify.append(index)
            else:
                answers[index] = {"r": "correct" if verdict else "wrong"}
        keys_by_index = list(unique)
        timeout = self._inner_timeout()
        tasks = [self._task(keys_by_index[index], timeout) for index in to_verify]
        for index, answer in zip(to_verify, self.pool.map(tasks, self.timeout_s) if tasks else []):
            answers[index] = answer
        outcomes = [self._outcome(key, answers[unique[key]] if isinstance(key, tuple) else None) for key in keys]
        for key, outcome in zip(keys, outcomes):
            if outcome == "gold_error" and key is not None:
                _warn_gold(raw_gold[key])
        log_outcomes(self.__name__, outcomes, _OUTCOMES, kwargs.get("log_metric"))
        if "gold_error" in outcomes:  # so that an over-eager broken-gold rule shows up in the logs
            _LOG.warning(
                "%s: %d of %d rows scored None (gold not an answer)",
                self.__name__,
                outcomes.count("gold_error"),
                len(outcomes),
            )
        values = {"correct": self.correct_value, "wrong": self.wrong_value, "no_answer": self.wrong_value}
        values.update(timeout=self.timeout_value, gold_error=None)
        return [values[outcome] for outcome in outcomes]

    @staticmethod
    def _task(key: tuple, timeout: int) -> dict:
        gold, ordered, answer = key
        task = {"gold": list(gold), "ordered": ordered, "timeout": timeout}
        return task | {"answer": list(answer)}

    def _inner_timeout(self) -> int:
        # math-verify's own (signal) timeouts, per parse and per verify, inside the hard deadline
        return max(1, int(self.timeout_s / 3))

    @staticmethod
    def _outcome(key: tuple | str | None, answer: dict | None) -> str:
        if key is None:
            return "gold_error"
        if key == "no_answer":
            return "no_answer"
        if answer is None:
            return "timeout"
        return answer["r"] if answer["r"] in ("correct", "wrong") else "gold_error"


math_accuracy = MathAccuracy()
