"""Comparison of two parsed values in the math workers (sympy side): numbers exactly or as printed, equations
between numbers, ``i`` as the imaginary unit, vectors written as tuples.

math-verify compares numbers after rounding them to 6 decimal places, so ``10^{-7}`` equals ``2 \\cdot 10^{-7}``
and ``\\sqrt{2}/10^{20}`` equals ``\\sqrt{3}/10^{20}``; here exact values must be equal and a printed decimal is
its printed value. Imported by the workers only (it needs sympy and math-verify).
"""

from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_UP, Context, Decimal


def numeric_verdict(gold, answer, gold_expr, answer_expr) -> bool | None:
    """The verdict for two numbers (``x = 3`` counts as 3 against a number), else None (math-verify decides).
    ``gold`` and ``answer`` give ``decimal`` (the printed value of a decimal) and the gold ``digits`` (its
    printed value when it has 6+ significant digits). Exact values must be equal; a printed decimal must equal
    the other side, or be its rounding: a gold printed with 6+ significant digits (``2.31481 \\times 10^{-3}``
    for ``\\frac{1}{432}``), an answer with 6+ significant digits and 6+ decimal places (``0.333333``)."""
    from sympy import Eq, Expr, Float, Rational, nan, nsimplify, oo, zoo

    if isinstance(gold_expr, Eq) and isinstance(answer_expr, Eq):
        return None
    gold_expr, answer_expr = _value_side(gold_expr), _value_side(answer_expr)
    if not all(isinstance(expr, Expr) and expr.is_number for expr in (gold_expr, answer_expr)):
        return None
    if any(expr.has(oo, -oo, zoo, nan) for expr in (gold_expr, answer_expr)):
        return gold_expr == answer_expr
    gold_float, answer_float = gold_expr.has(Float), answer_expr.has(Float)
    gold_decimal = gold.decimal if gold_float else None
    answer_decimal = answer.decimal if answer_float else None
    if (gold_float and gold_decimal is None) or (answer_float and answer_decimal is None):
        # a decimal inside an expression (1.5\pi): its printed digits, exactly
        return values_equal(nsimplify(gold_expr, rational=True), nsimplify(answer_expr, rational=True))
    if gold_float and answer_float:  # a longer decimal answer may round to a 6+ digit gold: 1.3333333 for 1.333333
        if gold.digits is None or len(answer_decimal.as_tuple().digits) <= len(gold.digits.as_tuple().digits):
            return gold_decimal == answer_decimal
        return _rounded(answer_decimal, gold.digits)
    if gold_float:
        if gold.digits is not None:
            return rounds_to(gold.digits, answer_expr)
        return values_equal(Rational(*gold_decimal.as_integer_ratio()), answer_expr)  # 0.33 is not 1/3
    if answer_float:
        if values_equal(Rational(*answer_decimal.as_integer_ratio()), gold_expr):
            return True
        _, digits, exponent = answer_decimal.as_tuple()
        return len(digits) >= 6 and exponent <= -6 and rounds_to(answer_decimal, gold_expr)
    return values_equal(gold_expr, answer_expr)


def named_value(gold, answer):
    """The answer to compare with ``gold``: for an equation ``lhs = value`` against a gold that is no equation,
    ``value`` when ``lhs`` names it (``x``, ``f(3)``, ``(x, y)``), else None (``2x + 1 = 5`` is not 5, and
    ``\\text{wrong: } 4 = 3`` is not 3); any other answer as it is."""
    from sympy import Eq, Symbol, Tuple
    from sympy.core.function import AppliedUndef
    from sympy.core.relational import Relational

    if not isinstance(answer, Eq) or isinstance(gold, Relational):
        return answer
    names = answer.lhs.args if isinstance(answer.lhs, Tuple) else (answer.lhs,)
    if all(isinstance(name, (Symbol, AppliedUndef)) for name in names):
        return answer.rhs
    return answer if not answer.lhs.free_symbols else None


def in_degrees(expr):
    """An angle in radians (a number) in degrees: ``\\frac{\\pi}{3}`` -> 60; anything else as it is (a degree sign
    inside ``\\sin(90^\\circ - x)`` stays a value in radians)."""
    from sympy import Expr, pi, simplify

    try:
        return simplify(expr * 180 / pi) if isinstance(expr, Expr) and expr.is_number else expr
    except Exception:
        return expr


def _value_side(expr):
    from sympy import Eq, Symbol

    return expr.rhs if isinstance(expr, Eq) and isinstance(expr.lhs, Symbol) else expr


def values_equal(first, second) -> bool:
    """Two numbers equal: their difference is 0, or too close to 0 for sympy to find 30 digits of it."""
    from sympy.core.evalf import PrecisionExhausted

    try:
        difference = first - second
        if difference == 0:
            return True
        return bool(difference.evalf(30, strict=True) == 0)
    except PrecisionExhausted:  # 0, or a difference below 10**-100 (cos(10**-100) is not 1): only a proof counts
        return _simplifies_to_zero(difference)
    except Exception:
        return False


def _simplifies_to_zero(difference) -> bool:
    from sympy import simplify

    try:
        return simplify(difference) == 0
    except Exception:
        return False


def rounds_to(gold: Decimal, answer) -> bool:
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
        return _rounded(Decimal(str(value)), gold)
    except Exception:
        return False


def _rounded(value: Decimal, printed: Decimal) -> bool:
    """True when ``value`` rounded (half up) to the significant digits of ``printed`` is ``printed``."""
    digits = len(printed.as_tuple().digits)
    return Context(prec=digits, rounding=ROUND_HALF_UP, Emax=MAX_EMAX, Emin=MIN_EMIN).plus(value) == printed


def same_complex(gold, answer, timeout: int) -> bool:
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


def false_numeric_equation(expr) -> bool:
    """True for an equation between two different numbers (``2 = 3``); ``2 + 1 = 3`` and ``x = 3`` are fine."""
    from sympy import Eq

    if not isinstance(expr, Eq) or expr.free_symbols:
        return False
    return not values_equal(expr.lhs, expr.rhs)


def vector_vs_tuple(gold, answer) -> bool:
    """A column or row vector written as a tuple: (1, 2, 3) for a 3x1 pmatrix (never a scalar, never a set;
    math-verify reads a pair (1, 2) as an open interval)."""
    from sympy import Interval, MatrixBase, Tuple

    if not isinstance(gold, MatrixBase) or 1 not in gold.shape:
        return False
    if isinstance(answer, Interval):
        return len(gold) == 2 and answer.left_open and answer.right_open
    return isinstance(answer, Tuple) and len(answer) == len(gold)


def as_tuples(gold, answer):
    from sympy import Interval, Tuple

    answer = Tuple(answer.start, answer.end) if isinstance(answer, Interval) else answer
    return Tuple(*gold), answer
