"""MathAccuracy on the comparison classes of the third adversarial review, each with rows of our own: sets of sets,
letters that differ only in case, decimals inside tuples, intervals, matrices and roots (math-verify rounds them to
6 places), and differences sympy evaluates to 0 without proof. Every wrong answer sits next to a right one, so a
fix that rejects all fails too."""

import pytest

from trl_ext.rewards import MathAccuracy

REWARD = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0)

# (gold, right, wrong) per root cause
CASES = {
    # a set of sets is not the set of their elements (math-verify counts {x} as x at any depth)
    "set of the empty set": (r"\emptyset", r"\boxed{\varnothing}", r"\boxed{\{\emptyset\}}"),
    "set of a set": (r"\{4, 6\}", r"\boxed{\{6, 4\}}", r"\boxed{\{\{4, 6\}\}}"),
    "set of singletons": (r"\{4, 6\}", r"\boxed{4, 6}", r"\boxed{\{\{4\}, \{6\}\}}"),
    "singleton nested twice": (r"\{5\}", r"\boxed{\{5\}}", r"\boxed{\{\{5\}\}}"),
    "gold set of singletons": (r"\{\{4\}, \{6\}\}", r"\boxed{\{\{6\}, \{4\}\}}", r"\boxed{\{4, 6\}}"),
    "gold set of the empty set": (r"\{\emptyset\}", r"\boxed{\left\{\emptyset\right\}}", r"\boxed{\emptyset}"),
    # B and b are two variables (math-verify lower-cases every letter)
    "B over b is no number": (r"\frac{B}{b}", r"\boxed{\frac{B}{b}}", r"\boxed{1}"),
    "b over B": (r"\frac{B}{b}", r"\boxed{B/b}", r"\boxed{\frac{b}{B}}"),
    "P plus p": ("P + p", r"\boxed{p + P}", r"\boxed{2p}"),
    "coefficients by case": ("Cx^2 + cx", r"\boxed{cx + Cx^2}", r"\boxed{cx^2 + Cx}"),
    # a decimal inside a tuple, interval, matrix or union is its printed value, as a bare decimal is
    "interval end": (r"[0, \frac{1}{4}]", r"\boxed{[0, 0.25]}", r"\boxed{[0, 0.2499999]}"),
    "half-open interval": (r"(-\infty, \frac{1}{4}]", r"\boxed{(-\infty, 0.25]}", r"\boxed{(-\infty, 0.2500001]}"),
    "point": (r"(\frac{1}{4}, 2)", r"\boxed{(0.25, 2)}", r"\boxed{(0.2500001, 2)}"),
    "rounded point": (r"(\frac{2}{3}, 1)", r"\boxed{(0.666667, 1)}", r"\boxed{(0.6666669, 1)}"),
    "vector": (
        r"\begin{pmatrix} \frac{1}{4} \\ 2 \end{pmatrix}",
        r"\boxed{\begin{pmatrix} 0.25 \\ 2 \end{pmatrix}}",
        r"\boxed{\begin{pmatrix} 0.2499999 \\ 2 \end{pmatrix}}",
    ),
    "union": (
        r"(0, \frac{1}{4}) \cup (1, 2)",
        r"\boxed{(0, 0.25) \cup (1, 2)}",
        r"\boxed{(0, 0.2499999) \cup (1, 2)}",
    ),
    "decimal gold in a point": (r"(2.5, 1)", r"\boxed{(\frac{5}{2}, 1)}", r"\boxed{(2.4999999, 1)}"),
    "decimal times a variable": (r"\frac{y}{4}", r"\boxed{0.25y}", r"\boxed{0.2499999y}"),
    # a decimal inside a root keeps its digits (sympy's nsimplify reads 36.0000000001 as 36)
    "decimal under a root": ("6", r"\boxed{\sqrt{36}}", r"\boxed{\sqrt{36.0000000001}}"),
    "gold decimal under a root": (r"\sqrt{36.0000000001}", r"\boxed{\sqrt{36.0000000001}}", r"\boxed{6}"),
    # sympy evaluates log(1 + 10^-500) to exactly 0: an evaluation to 0 is no proof
    "log of one plus a tiny number": ("0", r"\boxed{\ln 1}", r"\boxed{\ln(1 + 10^{-500})}"),
    # the same sum in another order (math-verify leaves sums unevaluated; simplify took minutes)
    "sum in another order": (
        r"\frac{\sqrt{\sqrt{7}+\sqrt{13}}}{9+4\sqrt{5}}",
        r"\boxed{\frac{\sqrt{\sqrt{13}+\sqrt{7}}}{4\sqrt{5}+9}}",
        r"\boxed{\frac{\sqrt{\sqrt{13}+\sqrt{7}}}{4\sqrt{5}+8}}",
    ),
}


@pytest.mark.parametrize("gold, right, wrong", CASES.values(), ids=CASES.keys())
def test_right_answer_scores_right_and_wrong_answer_wrong(gold, right, wrong):
    assert REWARD([right, wrong], solution=[gold, gold]) == [1.0, -1.0]


# golds written in Python strings without r"": "\frac" is a form feed then "rac", "\beta" a backspace then "eta"
ESCAPED_GOLDS = {
    "form feed for \\f": ("\frac{\\sqrt{11}}{11}", r"\boxed{\frac{\sqrt{11}}{11}}", r"\boxed{\frac{\sqrt{11}}{12}}"),
    "backspace for \\b": ("2\beta", r"\boxed{2\beta}", r"\boxed{2\alpha}"),
    "escaped backslash and form feed": ("-\\\frac{3}{4}", r"\boxed{-\frac{3}{4}}", r"\boxed{\frac{3}{4}}"),
}


@pytest.mark.parametrize("gold, right, wrong", ESCAPED_GOLDS.values(), ids=ESCAPED_GOLDS.keys())
def test_gold_with_python_escapes_reads_as_latex(gold, right, wrong):
    assert REWARD([right, wrong], solution=[gold, gold]) == [1.0, -1.0]


def test_a_tab_stays_a_tab():  # a tab may be meant: "\times" without r"" is not read back
    assert REWARD([r"\boxed{6000}"], solution=["6 \times 10^{3}"]) == [-1.0]


def test_an_answer_with_the_same_escapes_matches_its_gold():  # both sides read back alike
    gold = "\\begin{pmatrix} -\\\frac{7}{4} & 2 \\end{pmatrix}"
    assert REWARD([f"\\boxed{{{gold}}}"], solution=[gold]) == [1.0]
