"""Math verification worker process, started as ``python -c <this source> <path of _math_answers.py>``.

Run from source rather than ``-m`` so that it imports math-verify and the string helpers only, not the trl_ext
package (torch).

Reads one JSON task per line on stdin, writes one JSON result per line on a private copy of stdout (fd 1
itself is pointed at stderr so library prints cannot corrupt the protocol). Parsed gold parts are cached.
The parent enforces a hard deadline per task by killing this process; math-verify's own signal timeouts
(main thread only, which this is) usually fire first and keep the process alive.

A task holds the gold's parts, whether they are ordered, and the answer's parts (or, for anchored extraction
without a box, the answer region). Every gold part must be matched by exactly one answer part.
"""

import contextlib
import importlib
import json
import logging
import os
import re
import sys
import threading
import time
import types
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal
from functools import lru_cache, partial


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _load_answers(path: str):
    """``trl_ext.rewards._math_answers`` (at ``path``) and the modules it imports, without running the trl_ext
    package's ``__init__`` (which imports torch): both packages are registered as bare namespaces on their folders."""
    rewards = os.path.dirname(os.path.abspath(path))
    for name, folder in (("trl_ext", os.path.dirname(rewards)), ("trl_ext.rewards", rewards)):
        package = types.ModuleType(name)
        package.__path__ = [folder]
        sys.modules[name] = package
    return importlib.import_module("trl_ext.rewards._math_answers")


class Part:
    """One part of a gold or of an answer: its value (``expr``: None when it does not parse to a finite
    expression; parsed on first use when the part is a plain integer or integer fraction, which ``fraction``
    then holds) and what the string comparisons need."""

    __slots__ = ("_expr", "_parse", "assignment", "brackets", "digits", "fraction", "key", "option", "time", "unit", "word")  # fmt: skip

    def __init__(self, text, expr, answers, gold, fraction=None, parse=None):
        self._expr, self._parse, self.fraction = expr, parse, fraction
        self.key = answers.text_key(text) if text is not None else None
        self.option = answers.option_letter(text, strict=gold) if text is not None else None
        self.word = text is not None and answers.is_word_answer(text)
        self.unit = answers.split_unit(text)[1] if text is not None else None
        self.assignment = text is not None and answers.is_assignment(text)
        self.brackets = answers.outer_brackets(text) if text is not None else None
        self.time = answers.time_of_day(text) if text is not None else None
        self.digits = answers.printed_decimal(text) if text is not None and gold else None

    @property
    def expr(self):
        if self._parse is not None:
            self._expr, self._parse = self._parse(), None
        return self._expr


class Grader:
    def __init__(self, answers_path: str) -> None:
        from latex2sympy2_extended.latex2sympy2 import NormalizationConfig
        from math_verify import ExprExtractionConfig, LatexExtractionConfig

        self.answers = _load_answers(answers_path)
        # math-verify's own unit stripping is off (it reads 3t as 3): units are split off by split_unit
        normalization = NormalizationConfig(units=False, malformed_operators=True, nits=True, boxed="all")
        latex = LatexExtractionConfig(
            boxed_match_priority=0, try_extract_without_anchor=False, normalization_config=normalization
        )
        self.boxed = [latex]
        self.anchored = [latex, ExprExtractionConfig(try_extract_without_anchor=False)]
        self.gold_parts = lru_cache(maxsize=4096)(self._gold_parts)

    def _parse(self, text, configs, timeout):
        from math_verify import parse
        from sympy import Basic, MatrixBase, nan, zoo

        parsed = parse(text, configs, fallback_mode="no_fallback", parsing_timeout=timeout)
        if not parsed or not isinstance(parsed[0], (Basic, MatrixBase)):
            return None
        expr = parsed[0]
        try:
            return None if expr.has(zoo, nan) else expr
        except Exception:
            return None

    def _parts(self, text, gold, timeout):
        """The Parts of one part string; a value that parses to a finite set ({a, b}, from "a or b") is one part
        per element."""
        from sympy import FiniteSet

        word_or_option = self.answers.is_word_answer(text) or self.answers.option_letter(text, strict=gold)
        value = self.answers.split_unit(text)[0]
        if word_or_option:
            return [Part(text, None, self.answers, gold)]
        fraction = self.answers.plain_fraction(value)
        if fraction is not None:  # parsed only if compared with a part that is not a plain fraction
            parse = partial(self._parse, "\\boxed{" + value + "}", self.boxed, timeout)
            return [Part(text, None, self.answers, gold, fraction, parse)]
        expr = self._parse("\\boxed{" + value + "}", self.boxed, timeout)
        if isinstance(expr, FiniteSet) and 1 < len(expr.args) <= self.answers.MAX_PARTS:
            return [Part(None, element, self.answers, gold) for element in expr.args]
        return [Part(text, expr, self.answers, gold)]

    def _gold_parts(self, texts: tuple, timeout: int):
        parts = []
        for text in texts:
            if not self.answers.looks_like_an_answer(text):
                return None  # "See the proof above.", a sentence: not an answer (it would parse as letters)
            start = time.monotonic()
            parsed = self._parts(text, True, timeout)
            if any(self._unreadable(part, text, timeout, start) for part in parsed):
                return None
            parts.extend(parsed)
        return parts

    def _unreadable(self, part, text, timeout, start) -> bool:
        """A gold part that no configuration reads: not a word, option, time or environment (compared as
        strings), and neither math-verify's LaTeX nor its plain-expression parser gives it a value. Decided
        only when the parses ended well within the timeout (a parse that timed out is not a verdict)."""
        if part.word or part.option or part.time or part.fraction is not None or "\\begin" in text:
            return False
        if part.expr is not None:
            return False
        from math_verify import ExprExtractionConfig, LatexExtractionConfig

        unread = self._parse(text, [LatexExtractionConfig(), ExprExtractionConfig()], timeout) is None
        return unread and time.monotonic() - start < timeout / 2  # a parse that timed out is not a verdict

    def same(self, gold: Part, answer: Part, timeout: int) -> bool:
        from math_verify import verify

        if gold.option is not None:
            return answer.option == gold.option
        if gold.time is not None and answer.time is not None:
            return gold.time == answer.time  # 20:34 = 20:34:00 = 8:34 P.M.
        if gold.key is not None and gold.key == answer.key:
            return True  # the same answer written the same way (normalised), parsed or not
        if gold.word or answer.word:
            return False  # words are compared as words, never as products of letters
        if gold.unit and answer.unit and gold.unit != answer.unit:
            return False
        if gold.brackets and answer.brackets and gold.brackets != answer.brackets:
            return False
        if gold.fraction is not None and answer.fraction is not None:
            return gold.fraction == answer.fraction  # math-verify's verdict too (exact rationals), without parsing
        if gold.expr is None or answer.expr is None:
            return False  # the string fallback above is the only way to match an answer that does not parse
        if _false_numeric_equation(answer.expr, timeout):
            return False  # "2 = 3": math-verify would take its right side
        if _vector_vs_tuple(gold.expr, answer.expr):
            gold_expr, answer_expr = _as_tuples(gold.expr, answer.expr)
        else:
            gold_expr, answer_expr = gold.expr, answer.expr
        if gold.digits is not None and _rounds_to(gold.digits, answer.expr):
            return True  # a gold printed with 6+ significant digits: an exact value that rounds to it
        if verify(gold_expr, answer_expr, timeout_seconds=timeout, allow_set_relation_comp=True):
            return True
        return _same_complex(gold_expr, answer_expr, timeout)

    def grade(self, task: dict) -> str:
        timeout = int(task["timeout"])
        gold = self.gold_parts(tuple(task["gold"]), timeout)
        if gold is None:
            return "gold_error"
        if task.get("answer") is not None:
            keys, gold_keys = [self.answers.text_key(text) for text in task["answer"]], [p.key or "" for p in gold]
            if (keys == gold_keys) if task["ordered"] else (sorted(keys) == sorted(gold_keys)):
                return "correct"  # every part written as in the gold (normalised): nothing to parse
            answer = [part for text in task["answer"] for part in self._parts(text, False, timeout)]
        else:
            answer = self._anchored(task["region"], timeout)
            if answer is None:
                return "wrong"
        if len(answer) > self.answers.MAX_PARTS:
            return "wrong"
        return "correct" if self.match(gold, answer, task["ordered"], timeout) else "wrong"

    def _anchored(self, region: str, timeout: int):
        """The answer Parts of a region without a box: the text math-verify's anchors ("the final answer is")
        point at, split and read like a boxed answer (units, thousands, words); its value when that text does
        not read."""
        from math_verify import parse
        from sympy import Basic, FiniteSet, MatrixBase

        found = parse(_UNSIGNED.sub(r"\1", region), self.anchored, parsing_timeout=timeout)
        if len(found) < 1 or not isinstance(found[0], (Basic, MatrixBase)):
            return None
        if len(found) > 1 and isinstance(found[1], str) and len(found[1]) <= self.answers.MAX_ANSWER_CHARS:
            texts = self.answers.split_parts(found[1])
            parts = [part for text in texts for part in self._parts(text, False, timeout)]
            if parts and all(part.expr is not None or part.word or part.option or part.time for part in parts):
                return parts
        expr = found[0]
        elements = expr.args if isinstance(expr, FiniteSet) else (expr,)  # "$2$ and $3$"
        return [Part(None, element, self.answers, False) for element in elements]

    def match(self, gold: list, answer: list, ordered: bool, timeout: int) -> bool:
        """All gold parts answered, each by its own answer part, nothing more (in order when ``ordered`` and the
        answer gives bare values)."""
        if len(gold) == 1 and len(answer) > 1:
            answer = _union_of_relations(answer, gold[0]) or answer  # "x < -1 or x > 3" for a union
        if len(answer) > len(gold) and not ordered:  # the same value written twice (1/2 and 0.5) counts once
            kept = []
            for part in answer:
                if not any(self.same(other, part, timeout) for other in kept):
                    kept.append(part)
            answer = kept
        if len(answer) != len(gold):
            return False
        if len(gold) == 1:
            return self.same(gold[0], answer[0], timeout)
        if ordered and not all(part.assignment for part in answer):
            return all(self.same(g, a, timeout) for g, a in zip(gold, answer))
        fits = [[self.same(g, a, timeout) for a in answer] for g in gold]
        return _perfect_matching(fits)


# "the answer is +7": math-verify's anchored extraction does not read an explicit plus sign
_UNSIGNED = re.compile(r"(\b(?:is|are|be|equals)\s*:?\s*\$?\s*)\+\s*(?=\d)", re.IGNORECASE)


def _rounds_to(gold: Decimal, answer) -> bool:
    """True when the exact ``answer`` (no decimal in it: a printed decimal is compared as printed), rounded to the
    significant digits of the printed decimal ``gold``, is ``gold``. Compared in decimal arithmetic, never in
    doubles (which overflow to inf or 0 past 1e308 and keep 17 digits)."""
    from sympy import Float

    try:
        if not answer.is_number or answer.has(Float) or not gold:
            return False
        digits = len(gold.as_tuple().digits)
        value = answer.evalf(digits + 20)
        if not (value.is_real and value.is_finite) or value.is_zero:
            return False
        return Context(prec=digits, Emax=MAX_EMAX, Emin=MIN_EMIN).plus(Decimal(str(value))) == gold
    except Exception:
        return False


def _same_complex(gold, answer, timeout: int) -> bool:
    """``i(2-i)`` for ``1+2i``: both sides use the letter i and nothing else, read as the imaginary unit."""
    from math_verify import verify
    from sympy import I

    try:
        gold_symbols, answer_symbols = gold.free_symbols, answer.free_symbols
        if len(gold_symbols) != 1 or len(answer_symbols) != 1:
            return False
        (gold_i,), (answer_i,) = gold_symbols, answer_symbols
        if gold_i.name != "i" or answer_i.name != "i":
            return False
        return verify(gold.subs(gold_i, I), answer.subs(answer_i, I), timeout_seconds=timeout)
    except Exception:
        return False


def _false_numeric_equation(expr, timeout: int) -> bool:
    """True for an equation between two different numbers (``2 = 3``); ``2 + 1 = 3`` and ``x = 3`` are fine."""
    from math_verify import verify
    from sympy import Eq

    if not isinstance(expr, Eq) or expr.free_symbols:
        return False
    return not verify(expr.lhs, expr.rhs, timeout_seconds=timeout)


def _union_of_relations(answer: list, gold: Part) -> list | None:
    """The answer parts "x < -1", "x > 3" as one part, the union of their solution sets, when the gold is an
    interval or a union of intervals; else None."""
    from sympy import FiniteSet, Set, Union
    from sympy.core.relational import Relational

    if not isinstance(gold.expr, Set) or isinstance(gold.expr, FiniteSet):
        return None
    if not all(isinstance(part.expr, Relational) and len(part.expr.free_symbols) == 1 for part in answer):
        return None
    try:
        union = Union(*(part.expr.as_set() for part in answer))
    except Exception:
        return None
    merged = Part(None, union, None, False)
    return [merged]


def _vector_vs_tuple(gold, answer) -> bool:
    """A column or row vector written as a tuple: (1, 2, 3) for a 3x1 pmatrix (never a scalar, never a set;
    math-verify reads a pair (1, 2) as an open interval)."""
    from sympy import Interval, MatrixBase, Tuple

    if not isinstance(gold, MatrixBase) or 1 not in gold.shape:
        return False
    if isinstance(answer, Interval):
        return len(gold) == 2 and answer.left_open and answer.right_open
    return isinstance(answer, Tuple) and len(answer) == len(gold)


def _as_tuples(gold, answer):
    from sympy import Interval, Tuple

    answer = Tuple(answer.start, answer.end) if isinstance(answer, Interval) else answer
    return Tuple(*gold), answer


def _perfect_matching(fits: list) -> bool:
    """Whether every row can be given its own column with ``fits[row][column]`` (Kuhn's augmenting paths)."""
    owner = [None] * len(fits[0])

    def assign(row, seen):
        for column, fit in enumerate(fits[row]):
            if fit and column not in seen:
                seen.add(column)
                if owner[column] is None or assign(owner[column], seen):
                    owner[column] = row
                    return True
        return False

    return all(assign(row, set()) for row in range(len(fits)))


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    logging.disable(logging.CRITICAL)
    grader = Grader(sys.argv[1])
    # warm the LaTeX parser up (its first use loads the grammar) so that deadlines measure verification only
    with contextlib.suppress(Exception):  # a broken install shows up on the first real task instead
        grader.grade({"gold": ["1"], "ordered": False, "answer": ["\\sqrt{1}"], "timeout": 5})
    out.write('{"ready": true}\n')
    for line in sys.stdin:
        task = json.loads(line)
        try:
            result = grader.grade(task)
        except Exception:
            result = "wrong"
        out.write(json.dumps({"r": result}) + "\n")


if __name__ == "__main__":
    main()
