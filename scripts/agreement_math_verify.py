"""Agreement of ``math_accuracy`` with Math-Verify's own labelled test cases, read from a Math-Verify checkout.

    git clone <Math-Verify repository> /tmp/mv
    OMP_NUM_THREADS=1 python scripts/agreement_math_verify.py --math_verify /tmp/mv [--show_agreeing]

Math-Verify's tests hold (gold, prediction, expected) cases in ``pytest.mark.parametrize`` tables. They are read
at run time from the checkout's ``tests/*.py`` with ``ast`` (never copied here): every table whose names include
``gold``, ``pred`` and ``expected`` (or ``result``), each case a tuple of literals or of f-strings of ``math``
functions of literals (any other case is listed as unreadable; nothing else is evaluated). A pair labelled 1 under one Math-Verify option and 0 under another (its
``strict=False``, ``allow_set_relation_comp=True``) has no single label: it is listed and left out. Repeated pairs
count once.

The prediction is the model's answer text: one that holds a box is the completion as it is; any other is put in
a box (``math_accuracy`` reads boxes only, never a number from free text), inside its math delimiters when the
whole prediction is one math span (``$\\frac13$`` -> ``$\\boxed{\\frac13}$``, as a model writes it). Each case is
scored in both styles of completion: a plain string and a conversational one
(``[{"role": "assistant", "content": ...}]``). Prints the agreement per style, then every disagreement with its
case, false positives (a case labelled 0 scored 1) first; a gold the reward refuses scores None, a disagreement.
"""

from __future__ import annotations

import argparse
import ast
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

LABELS = ("expected", "result")
_BOX = re.compile(r"\\(?:boxed|fbox|framebox|colorbox|fcolorbox|bbox)(?![A-Za-z])")
_ONE_SPAN = re.compile(r"(\$\$|\$|\\\(|\\\[)(.*)(\$\$|\$|\\\)|\\\])", re.DOTALL)
_MATH = re.compile(r"(\$\$.*?\$\$|\$.*?\$|\\\(.*?\\\)|\\\[.*?\\\])", re.DOTALL)
_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[^\W\d_]{2,}")
_CLOSING = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}


@dataclass
class Case:
    gold: str
    pred: str
    expected: int
    where: str  # file:line (test name)
    options: dict = field(default_factory=dict)


@dataclass
class Table:
    cases: list[Case] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # where: why


def _parametrize(decorator: ast.expr) -> tuple[list[str], ast.expr] | None:
    """(argument names, table node) of a ``@pytest.mark.parametrize(names, table)`` decorator, else None."""
    if not isinstance(decorator, ast.Call) or len(decorator.args) < 2:
        return None
    func = decorator.func
    if not (isinstance(func, ast.Attribute) and func.attr == "parametrize"):
        return None
    names = decorator.args[0]
    if isinstance(names, ast.Constant) and isinstance(names.value, str):
        return [name.strip() for name in names.value.split(",")], decorator.args[1]
    if isinstance(names, (ast.List, ast.Tuple)) and all(isinstance(n, ast.Constant) for n in names.elts):
        return [str(n.value).strip() for n in names.elts], decorator.args[1]
    return None


def _call_options(function: ast.FunctionDef) -> dict:
    """Constant keyword arguments of the calls in a test's body (``precision=5``, ``strict=False``)."""
    options = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                try:
                    options[keyword.arg] = ast.literal_eval(keyword.value)
                except ValueError:
                    continue
    return options


def _row_values(row: ast.expr) -> object:
    """A row's values: literals, and f-strings of ``math`` functions of literals (``f"{math.sqrt(17):.15f}"``);
    nothing else is evaluated (ValueError)."""
    if isinstance(row, ast.Tuple):
        return tuple(_row_values(element) for element in row.elts)
    if isinstance(row, ast.JoinedStr):
        return "".join(_fstring_piece(piece) for piece in row.values)
    return ast.literal_eval(row)


def _fstring_piece(piece: ast.expr) -> str:
    if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
        return piece.value
    if not isinstance(piece, ast.FormattedValue) or piece.conversion != -1:
        raise ValueError("not a plain f-string piece")
    spec = "" if piece.format_spec is None else _row_values(piece.format_spec)
    call = piece.value
    if isinstance(call, ast.Constant):
        return format(call.value, spec)
    is_math = isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
    if not (is_math and isinstance(call.func.value, ast.Name) and call.func.value.id == "math" and not call.keywords):
        raise ValueError("only math functions of literals are evaluated")
    function = getattr(math, call.func.attr, None)
    if not callable(function):
        raise ValueError(f"math.{call.func.attr} is no function")
    return format(function(*(ast.literal_eval(arg) for arg in call.args)), spec)


def read_tables(source: str, filename: str = "<table>") -> Table:
    """The labelled cases of every parametrized test in one test file's source."""
    table = Table()
    for function in ast.walk(ast.parse(source, filename)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in function.decorator_list:
            found = _parametrize(decorator)
            if found is None:
                continue
            names, rows = found
            label = next((name for name in LABELS if name in names), None)
            if "gold" not in names or "pred" not in names or label is None or not isinstance(rows, ast.List):
                continue
            base_options = _call_options(function)
            for row in rows.elts:
                where = f"{filename}:{row.lineno} ({function.name})"
                try:
                    values = _row_values(row)
                except ValueError:
                    table.unreadable.append(f"{where}: not a tuple of literals")
                    continue
                if not isinstance(values, tuple) or len(values) != len(names):
                    table.unreadable.append(f"{where}: {len(names)} names, another shape")
                    continue
                case = dict(zip(names, values))
                if not (isinstance(case["gold"], str) and isinstance(case["pred"], str)):
                    table.unreadable.append(f"{where}: gold or pred is not a string")
                    continue
                options = base_options | {k: v for k, v in case.items() if k not in ("gold", "pred", label)}
                table.cases.append(Case(case["gold"], case["pred"], int(case[label]), where, options))
    return table


def read_checkout(root: Path) -> Table:
    tests = root / "tests"
    if not tests.is_dir():
        raise SystemExit(f"--math_verify {root}: no tests/ folder (give the root of a Math-Verify checkout)")
    table = Table()
    for path in sorted(tests.glob("test_*.py")):
        found = read_tables(path.read_text(), path.name)
        table.cases += found.cases
        table.unreadable += found.unreadable
    if not table.cases:
        raise SystemExit(f"--math_verify {root}: no labelled (gold, pred, expected) tables under tests/")
    return table


def unique_cases(cases: list[Case]) -> tuple[list[Case], list[tuple[Case, Case]]]:
    """Cases with one label per (gold, pred), first seen first; and the pairs whose label depends on an option."""
    kept: dict[tuple[str, str], Case] = {}
    conflicts: list[tuple[Case, Case]] = []
    dropped: set[tuple[str, str]] = set()
    for case in cases:
        key = (case.gold, case.pred)
        if key in dropped:
            continue
        first = kept.get(key)
        if first is None:
            kept[key] = case
        elif first.expected != case.expected:
            conflicts.append((first, case))
            dropped.add(key)
            del kept[key]
    return list(kept.values()), conflicts


def completion_of(pred: str) -> str:
    """The completion a model would write for this answer: a prediction with a box, or prose (words around math,
    or a sentence), is the completion as it is; a bare answer is boxed, inside its math span when it is one span
    (``$\\frac13$`` -> ``$\\boxed{\\frac13}$``)."""
    if _BOX.search(pred):
        return pred
    lead, math, _ = _MATH.split(pred, 1) if _MATH.search(pred) else ("", None, None)
    words = _WORD.findall(_COMMAND.sub(" ", _MATH.sub(" ", pred)))
    if len(words) >= 3 or (math is not None and _WORD.search(_COMMAND.sub(" ", lead))):
        return pred  # a sentence, or a lead before the math ("Answer $9$"): a unit after it is the answer's
    span = _ONE_SPAN.fullmatch(pred.strip())
    if span and _CLOSING[span.group(1)] == span.group(3) and not re.search(r"\$|\\[()\[\]]", span.group(2)):
        return f"{span.group(1)}\\boxed{{{span.group(2).strip()}}}{span.group(3)}"
    return f"\\boxed{{{pred}}}"


def score(cases: list[Case], timeout_s: float) -> dict[str, list]:
    """Scores per reading: ``<style>/<extraction>`` for both styles and both of ``math_accuracy``'s extractions."""
    from trl_ext.rewards.math import MathAccuracy

    golds = [case.gold for case in cases]
    texts = [completion_of(case.pred) for case in cases]
    styles = {"plain": texts, "conversational": [[{"role": "assistant", "content": t}] for t in texts]}
    scores = {}
    for extraction in ("boxed", "anchored"):
        reward = MathAccuracy(timeout_s=timeout_s, extraction=extraction)
        for style, completions in styles.items():
            scores[f"{style}/{extraction}"] = reward(completions, solution=golds)
    return scores


def _shown(case: Case, got) -> str:
    options = f" {case.options}" if case.options else ""
    completion = completion_of(case.pred)
    shown = "" if completion == case.pred else f"\n    completion={completion!r}"
    return (
        f"  {case.where}{options}: expected {case.expected}, got {got}\n"
        f"    gold={case.gold!r}\n    pred={case.pred!r}{shown}"
    )


def disagreements(cases: list[Case], got: list) -> list[tuple[Case, object]]:
    """The cases scored otherwise than labelled, false positives (labelled 0, scored 1) first."""
    wrong = [(case, score) for case, score in zip(cases, got) if score != case.expected]
    return sorted(wrong, key=lambda item: not (item[1] == 1 and item[0].expected == 0))


def report(cases: list[Case], scores: dict[str, list]) -> str:
    lines = []
    for reading, got in scores.items():
        agree = sum(score == case.expected for case, score in zip(cases, got))
        false_pos = sum(score == 1 and case.expected == 0 for case, score in zip(cases, got))
        share = 100 * agree / len(cases)
        lines.append(f"{reading}: {agree}/{len(cases)} agree ({share:.1f}%), {false_pos} false positives")
    shown: dict[str, list] = {}
    for reading, got in scores.items():
        style, extraction = reading.split("/")
        plain = shown.get(f"plain/{extraction}")
        if plain is not None and plain == got:
            lines.append(f"\n{reading}: the same scores as plain/{extraction}")
            continue
        shown[reading] = got
        wrong = disagreements(cases, got)
        lines.append(f"\n{reading}: {len(wrong)} disagreements (false positives first)")
        lines += [_shown(case, score) for case, score in wrong]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--math_verify", type=Path, required=True, help="root of a Math-Verify checkout")
    parser.add_argument("--timeout_s", type=float, default=10.0, help="deadline per pair (generous: a loaded host)")
    args = parser.parse_args(argv)
    table = read_checkout(args.math_verify)
    cases, conflicts = unique_cases(table.cases)
    print(f"{len(table.cases)} labelled cases read, {len(cases)} distinct pairs scored")
    for where in table.unreadable:
        print(f"unreadable, left out: {where}")
    for first, other in conflicts:
        print(f"label depends on an option, left out: {first.where} {first.options} / {other.where} {other.options}")
    print(report(cases, score(cases, args.timeout_s)))


if __name__ == "__main__":
    sys.exit(main())
