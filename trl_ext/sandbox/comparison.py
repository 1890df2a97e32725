"""Output comparison, done in the parent process: nothing the sandboxed program does can reach it."""

from __future__ import annotations

import json
import math
from typing import Any


def _float_or_none(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _line_equal(actual: str, expected: str, float_tol: float | None) -> bool:
    if actual == expected:
        return True
    if float_tol is None:
        return False
    got, want = actual.split(), expected.split()
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g == w:
            continue
        gf, wf = _float_or_none(g), _float_or_none(w)
        if gf is None or wf is None or not math.isclose(gf, wf, rel_tol=float_tol, abs_tol=float_tol):
            return False
    return True


def compare_stdio(actual: str, expected: str, float_tol: float | None = None) -> bool:
    """Whole-output comparison: both outputs are stripped and split into lines, the line counts must match,
    and each pair of lines must be equal after stripping. With ``float_tol``, tokens of a differing line that
    both parse as floats may differ by ``float_tol`` (absolute or relative)."""
    got = [line.strip() for line in actual.strip().splitlines()]
    want = [line.strip() for line in expected.strip().splitlines()]
    return len(got) == len(want) and all(_line_equal(g, w, float_tol) for g, w in zip(got, want))


def values_equal(actual: Any, expected: Any, float_tol: float | None = None) -> bool:
    """Typed equality of an actual plain value with an expected JSON value: bools only equal bools, numbers
    compare by value (within ``float_tol`` when one side is a float), strings exactly, lists and tuples
    element-wise (JSON has no tuples, so either kind matches either), dicts key-wise, anything else by type and
    value. Both sides are judge-side plain data, so no user-defined ``__eq__`` is involved."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if isinstance(expected, float) or isinstance(actual, float):
            if math.isnan(expected) or math.isnan(actual):
                return math.isnan(expected) and math.isnan(actual)
            tol = float_tol or 0.0
            return math.isclose(actual, expected, rel_tol=tol, abs_tol=tol)
        return actual == expected
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(expected)
            and all(values_equal(a, e, float_tol) for a, e in zip(actual, expected))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(values_equal(actual[k], expected[k], float_tol) for k in expected)
        )
    return type(actual) is type(expected) and actual == expected


def call_records(stdout: str, marker: str) -> dict[int, dict]:
    """The per-case records the harness wrote to stdout, by case index (first record wins: a program that forges
    records can only claim results it could have returned, since expected values never enter the sandbox)."""
    records: dict[int, dict] = {}
    for line in stdout.splitlines():
        if not line.startswith(marker):
            continue
        try:
            record = json.loads(line[len(marker) :])
            index = record["i"]
        except (ValueError, KeyError, TypeError):
            continue
        if type(index) is int and index not in records:
            records[index] = record
    return records
