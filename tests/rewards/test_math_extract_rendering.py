"""MathAccuracy's extraction side on the third adversarial review's boxed classes, with rows of our own: option
letters written with non-Latin look-alikes, equations with a constant side and ``:=`` chains, LaTeX that renders
otherwise than it parses, and prime marks after a number. Every wrong answer sits next to a right one, so a fix
that rejects everything fails too."""

import pytest

from trl_ext.rewards import MathAccuracy
from trl_ext.rewards._math_normalise import ambiguous_latex, constant_side_last, latin_letters

BOXED = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0)


def test_latin_look_alikes_are_read_as_latin_letters():
    assert latin_letters("(A) / \u0412, \uff24, \U0001d403, \u0392, \u0421") == "(A) / B, D, D, B, C"
    assert latin_letters("3\u00b2 + \u03b1 + \u03c0") == "3\u00b2 + \u03b1 + \u03c0"  # not letters that look Latin


def test_constant_side_is_the_value_side():
    assert constant_side_last("0 = 3y - 6") == "3y - 6 = 0"
    assert constant_side_last("5 = t") == "t = 5"
    assert constant_side_last("t = 5") == "t = 5"
    assert constant_side_last("0 = y \\le 3") == "0 = y \\le 3"


@pytest.mark.parametrize(
    "content, ambiguous",
    [("3^12", True), ("4 \\cdot 10^15", True), ("\\frac356", True), ("5^-2", True), ("\\sqrt35", True)]
    + [("0.\\overline{6}1", True), ("\\frac{\\pi}{4}^\\circ", True), ("3^{12}", False), ("\\frac35", False)]
    + [("45^\\circ = \\frac{\\pi}{4}", False), ("a_{12}", False), ("\\sqrt{3}5", False)],
)
def test_latex_that_renders_otherwise_is_ambiguous(content, ambiguous):
    assert ambiguous_latex(content) is ambiguous


# (gold, right, wrong) per class, boxed
BOXED_ROWS = {
    "Cyrillic option letter": ("(B)", r"\boxed{(B)}", "\\boxed{(B) / \u0421}"),
    "fullwidth option letter": ("(B)", "\\boxed{\uff22}", "\\boxed{(B) \uff25}"),
    "math-bold option letter": ("(B)", r"\boxed{(B)}", "\\boxed{(B)/\U0001d400}"),
    "Greek option letter": ("(A)", r"\boxed{(A)}", "\\boxed{(A), \u0392}"),
    "option beyond E": ("(B)", r"\boxed{(B) 15}", r"\boxed{(B)/(G)}"),
    "equation with a constant left side": ("3y - 6", r"\boxed{3y - 6}", r"\boxed{0 = 3y - 6}"),
    "equation with a nonzero constant side": ("t^2 + 1", r"\boxed{t^2 + 1}", r"\boxed{2 = t^2 + 1}"),
    "constant then a variable": ("5", r"\boxed{5 = t}", r"\boxed{6 = t}"),
    "defined-as chain": ("5", r"\boxed{t := 5}", r"\boxed{t := 6 = 5}"),
    "unbraced exponent": ("4096", r"\boxed{2^{12}}", r"\boxed{2^12}"),
    "unbraced power of ten": (r"3 \times 10^{14}", r"\boxed{3 \times 10^{14}}", r"\boxed{3 \times 10^14}"),
    "unbraced fraction": (r"\frac{3}{56}", r"\boxed{\frac3{56}}", r"\boxed{\frac356}"),
    "digit after a repeating decimal": (r"\frac{2}{3}", r"\boxed{0.\overline{6}}", r"\boxed{0.\overline{6}1}"),
    "arcminutes": (r"45^\circ", r"\boxed{45^\circ}", r"\boxed{45'}"),
    "arcseconds": (r"45^\circ", r"\boxed{45}", r"\boxed{45''}"),
    "degrees of a multiple of pi": (r"\frac{\pi}{4}", r"\boxed{\frac{\pi}{4}}", r"\boxed{\frac{\pi}{4}^\circ}"),
}


@pytest.mark.parametrize("gold, right, wrong", BOXED_ROWS.values(), ids=list(BOXED_ROWS))
def test_boxed_right_answer_right_and_wrong_answer_wrong(gold, right, wrong):
    assert BOXED([right, wrong], solution=[gold, gold]) == [1.0, -1.0]
