"""Unicode math, end marks and approximation signs read before math-verify, and word labels (red-team round 3)."""

import pytest

from trl_ext.rewards._math_answers import plain_latex, split_approximation, split_unit, text_key, word_label


@pytest.mark.parametrize(
    "text, latex",
    [
        ("3\u00d710\u2075", "3\\times 10^{5}"),
        ("\u221a2", "\\sqrt{2}"),
        ("\u221b(x+1)", "\\sqrt[3]{(x+1)}"),
        ("x\u00b2 + y\u207b\u00b9", "x^{2} + y^{-1}"),
        ("\u00bd", "\\frac{1}{2}"),
        ("-\u221e", "-\\infty "),
        ("\u03b8 + \u0394", "\\theta  + \\Delta "),
        ("a\u2081", "a_{1}"),
        ("5\\qquad\\blacksquare", "5"),
        ("5 \\checkmark", "5"),
        ("5 \\qed", "5"),
        ("\\square", "\\square"),  # a mark alone is kept
        ("\\square ABCD", "\\square ABCD"),  # a mark only at the end
    ],
)
def test_plain_latex(text, latex):
    assert plain_latex(text) == latex


def test_approximation_split_and_units_in_one_text_command():
    assert split_approximation("x = \\frac{1}{3} \\approx 0.333") == ("x = \\frac{1}{3}", ["0.333"])
    assert split_approximation("x \\sim 3") == ("x", ["3"])
    assert split_approximation("x = 3") is None
    assert split_unit("\\text{5 days}") == ("5", "day")
    assert split_unit("\\text{5 or more}") == ("\\text{5 or more}", None)


def test_word_labels_and_angle_names():
    assert word_label("\\text{wrong} = 2") and word_label("x_{\\text{not}} = 2") and word_label("x_{wrong} = 2")
    assert not word_label("x_{12} = 2") and not word_label("v_{max} = 2") and not word_label("a_{n} = 2")
    assert not word_label("v_{\\text{max}} = 2") and not word_label("x = 2") and not word_label("\\text{wrong}")
    assert text_key("\\angle CBA") == text_key("\\angle ABC") != text_key("\\angle BAC")
