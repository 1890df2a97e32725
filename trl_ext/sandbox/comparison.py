"""Output comparison, done in the parent process: nothing the sandboxed program does can reach it."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

_SPACE = " \t\r\v\f"  # ASCII blanks only: str.split()/strip() also take \x1c-\x1f, \x85, U+2028 as separators


def _float_or_none(token: str) -> float | None:
    if "_" in token or not token.isascii():  # float() accepts "1_000" and other scripts' digits: not a printed number
        return None
    try:
        return float(token)
    except ValueError:
        return None


_INTEGER = re.compile(r"[+-]?[0-9]+\Z")


def _integer_key(token: str) -> str:
    """An ASCII integer token's exact value as text (sign, digits without leading zeros; -0 is 0): no ``int()``,
    which refuses more than 4,300 digits."""
    digits = token.lstrip("+-").lstrip("0")
    return ("-" if token.startswith("-") and digits else "") + digits


def _line_equal(actual: str, expected: str, float_tol: float | None) -> bool:
    if actual == expected:
        return True
    if float_tol is None:
        return False
    got, want = _tokens(actual), _tokens(expected)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g == w:
            continue
        if _INTEGER.match(g) and _INTEGER.match(w):  # two integers: exact, as Python compares them
            if _integer_key(g) == _integer_key(w):
                continue
            return False
        if not _token_close(g, w, float_tol):
            return False
    return True


_DECIMAL = re.compile(r"[+-]?(?:[0-9]++(?:\.[0-9]*+)?|\.[0-9]++)(?:[eE]([+-]?[0-9]++))?\Z")  # possessive: linear
_MAX_EXACT = 4000  # characters of a token, and digits of its exponent's size, compared as exact fractions


def _token_close(printed: str, expected: str, tol: float) -> bool:
    """Two number tokens within ``tol``: decimal numbers by their exact values (``float()`` turns every token past
    1.8e308 into inf and below 5e-324 into 0, where ``math.isclose`` would match any two of them), infinity and
    NaN literals as floats (an infinity literal never matches a number past the float range)."""
    forms = _DECIMAL.match(printed), _DECIMAL.match(expected)
    if all(forms):
        return _exact_close(printed, expected, forms, tol)
    gf, wf = _float_or_none(printed), _float_or_none(expected)
    if any(forms) or gf is None or wf is None:
        return False
    return math.isclose(gf, wf, rel_tol=tol, abs_tol=tol)


def _exact_close(printed: str, expected: str, forms: tuple, tol: float) -> bool:
    """Two decimal tokens within ``tol`` by their exact values (``_within``, the formula of ``_close``); a token
    too long or with an exponent too large for a bounded fraction matches only an exactly equal one."""
    tokens = printed, expected
    if all(len(t) <= _MAX_EXACT and abs(int(m.group(1) or 0)) <= _MAX_EXACT for t, m in zip(tokens, forms)):
        return _within(Fraction(printed), Fraction(expected), tol)
    try:
        return Decimal(printed) == Decimal(expected)  # exact, whatever the exponent (no arithmetic)
    except ArithmeticError:  # an exponent past decimal's own range: no value to compare
        return False


def _within(a: Fraction, e: Fraction, tol: float) -> bool:
    """``math.isclose(a, e, rel_tol=tol, abs_tol=tol)`` on exact values."""
    return abs(a - e) <= max(Fraction(tol) * max(abs(a), abs(e)), Fraction(tol))


def _tokens(line: str) -> list[str]:
    return [token for token in line.replace("\t", " ").replace("\v", " ").replace("\f", " ").split(" ") if token]


def _lines(output: str) -> list[str]:
    return [line.strip(_SPACE) for line in output.replace("\r\n", "\n").strip(_SPACE + "\n").split("\n")]


def compare_stdio(actual: str, expected: str, float_tol: float | None = None) -> bool:
    """Whole-output comparison: both outputs are stripped and split into lines at "\n" (or "\r\n"), the line
    counts must match, and each pair of lines must be equal after stripping ASCII blanks (no other character
    separates lines or tokens). With ``float_tol``, tokens of a differing line that both parse as floats may
    differ by ``float_tol`` (absolute or relative); two integer tokens must be equal."""
    got, want = _lines(actual), _lines(expected)
    return len(got) == len(want) and all(_line_equal(g, w, float_tol) for g, w in zip(got, want))


def _close(actual: Any, expected: Any, tol: float) -> bool:
    """``math.isclose`` with ``tol`` as both tolerances, exact (with fractions) where a value is beyond floats."""
    try:
        return math.isclose(actual, expected, rel_tol=tol, abs_tol=tol)
    except OverflowError:  # an int (or a fraction) too large for a float: never converted, compared exactly
        if any(isinstance(v, (float, Decimal)) and not math.isfinite(v) for v in (actual, expected)):
            return False
        return _within(Fraction(actual), Fraction(expected), tol)


def _json_key(key: Any) -> str | None:
    """The text JSON writes for a dict key (``json.dumps`` rules), None for a key JSON cannot write."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return json.dumps(key)
    if type(key) is int and key.bit_length() < 10000:
        return str(key)
    if type(key) is float:
        return json.dumps(key)
    return None


def _json_keyed(mapping: dict) -> dict | None:
    keyed = {_json_key(k): v for k, v in mapping.items()}
    return keyed if None not in keyed and len(keyed) == len(mapping) else None


_NUMBERS = (int, float, Fraction, Decimal)


def values_equal(actual: Any, expected: Any, float_tol: float | None = None, depth: int = 0) -> bool:
    """Typed equality of an actual plain value with an expected JSON value: bools only equal bools; numbers
    (int, float, Fraction, Decimal) compare by exact value as Python's ``==`` does, or within ``float_tol`` (absolute or
    relative) when one side is a float and a tolerance is given; NaN equals NaN; strings exactly; lists and
    tuples element-wise (JSON has no tuples, so either kind matches either); dicts (Counter, OrderedDict,
    defaultdict included) key-wise, where keys written as JSON writes them (``1`` -> ``"1"``, ``True`` ->
    ``"true"``, ``None`` -> ``"null"``) match JSON's string keys, and two keys that write the same text never
    match; anything else by type and value. Both sides are judge-side plain data, so no user-defined ``__eq__``
    is involved. Total: never raises, whatever the values."""
    if depth > 200:
        return False
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, _NUMBERS) and isinstance(actual, _NUMBERS):
        if isinstance(expected, float) or isinstance(actual, float):
            if expected != expected or actual != actual:  # NaN (a float or a Decimal; never a signalling one)
                return expected != expected and actual != actual
            if float_tol:
                return _close(actual, expected, float_tol)
        return actual == expected  # exact, even for an int beyond 2**53 against a float
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(expected)
            and all(values_equal(a, e, float_tol, depth + 1) for a, e in zip(actual, expected))
        )
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or len(actual) != len(expected):
            return False
        if actual.keys() != expected.keys():
            actual, expected = _json_keyed(actual), _json_keyed(expected)
            if actual is None or expected is None or actual.keys() != expected.keys():
                return False
        return all(values_equal(actual[k], expected[k], float_tol, depth + 1) for k in expected)
    return type(actual) is type(expected) and actual == expected
