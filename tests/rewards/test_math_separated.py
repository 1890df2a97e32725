"""MathAccuracy on answers set apart inside one box, chains whose sides differ, and cut decimals. math-verify reads
a box's content as one expression: two candidates set apart by spacing, a line break, a logical connective or text
become their sum, their product or the last of them, and it drops a trailing ellipsis. Every wrong answer sits next
to a right one, so a fix that rejects all fails too."""

import pytest

from trl_ext.rewards import MathAccuracy
from trl_ext.rewards._math_answers import separated, text_key

REWARD = MathAccuracy(timeout_s=20.0)
ANCHORED = MathAccuracy(timeout_s=20.0, extraction="anchored")

# (gold, right, wrong) per root cause
CASES = {
    # candidates set apart by wide spacing are neither one number nor their sum or product
    "quad: no sum": ("11", r"\boxed{11}", r"\boxed{2 \quad 9}"),
    "qquad: no sum": ("11", r"\boxed{11}", r"\boxed{2 \qquad 9}"),
    "medspace: no sum": ("11", r"\boxed{11}", r"\boxed{2\medspace 9}"),
    "quad: no number": ("29", r"\boxed{29}", r"\boxed{2\quad 9}"),
    "text space: no number": ("29", r"\boxed{29}", r"\boxed{2\text{ }9}"),
    "fractions: no product": (r"\frac{1}{15}", r"\boxed{\frac{1}{15}}", r"\boxed{\frac{1}{3} \quad \frac{1}{5}}"),
    "bracketed: no sum": ("11", r"\boxed{11}", r"\boxed{(2) \quad (9)}"),
    # two statements in one box are two answers, whatever sets them apart
    "quad between equations": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \quad t = 9}"),
    "line break": ("t = 9", r"\boxed{t = 9}", r"\boxed{t = 2 \\ t = 9}"),
    "thin space before a statement": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \; t = 9}"),
    "logical or": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \lor t = 9}"),
    "logical and": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \wedge t = 9}"),
    "words between": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \text{ instead of } t = 9}"),
    "kern between equations": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \kern1em t = 9}"),
    "skip between equations": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \hskip 2em t = 9}"),
    "phantom between numbers": ("11", r"\boxed{11}", r"\boxed{2 \phantom{0} 9}"),
    "alignment mark between equations": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 & t = 9}"),
    "bar before a statement": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \vert t = 9}"),
    "box of words between equations": ("9", r"\boxed{t = 9}", r"\boxed{t = 2 \hbox{ } t = 9}"),
    # a chain: every side that is a value agrees, and no side still holds the unknown it names
    "zero term hides a value": ("9", r"\boxed{t = 4 + 5 = 9}", r"\boxed{t = 2 + 0t = 9}"),
    "side holds the unknown": ("9", r"\boxed{t = 9}", r"\boxed{t = 3t = 9}"),
    "zero term in another variable": ("9", r"\boxed{t = 0s + 9 = 9}", r"\boxed{t = 2 + 0 \cdot s = 9}"),
    "zero term behind a function name": ("9", r"\boxed{h(t) = 9}", r"\boxed{h(t) = 2 + 0t = 9}"),
    "expressions differ": ("s^2", r"\boxed{h(s) = s \cdot s = s^2}", r"\boxed{h(s) = s^5 = s^2}"),
    "vectors differ": (
        r"\begin{pmatrix}5\\6\end{pmatrix}",
        r"\boxed{w = \begin{pmatrix}5\\6\end{pmatrix}}",
        r"\boxed{w = \begin{pmatrix}6\\5\end{pmatrix} = \begin{pmatrix}5\\6\end{pmatrix}}",
    ),
    # a matrix's & and \\ are no gap between digits: its shape stays in the string compared
    "matrix shape": (
        r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
        r"\boxed{\begin{pmatrix}1&2\\3&4\end{pmatrix}}",
        r"\boxed{\begin{pmatrix} 1 & 2 & 3 & 4 \end{pmatrix}}",
    ),
    # a decimal cut with an ellipsis says it is not the exact value
    "ldots": ("2.23", r"\boxed{2.23}", r"\boxed{2.23\ldots}"),
    "three dots": ("0.66", r"\boxed{0.66}", r"\boxed{0.66...}"),
    "cdots": ("1.41", r"\boxed{1.41}", r"\boxed{1.41\cdots}"),
}


@pytest.mark.parametrize("name", CASES)
def test_right_scores_one_and_wrong_scores_zero(name):
    gold, right, wrong = CASES[name]
    assert REWARD([right, wrong], solution=[gold, gold]) == [1.0, 0.0]


@pytest.mark.parametrize(
    "gold, right, wrong",
    [
        ("11", "The answer is $11$.", r"The answer is $2 \quad 9$."),
        ("9", "The answer is $t = 9$.", r"The answer is $t = 2 \text{ not } t = 9$."),
        ("0.66", "The answer is 0.66.", "The answer is 0.66..."),
    ],
)
def test_anchored_answers_are_graded_alike(gold, right, wrong):
    assert ANCHORED([right, wrong], solution=[gold, gold]) == [1.0, 0.0]


@pytest.mark.parametrize(
    "gold, answer",
    [
        (r"2\pi", r"\boxed{2\,\pi}"),  # a thin space inside a product
        ("1000", r"\boxed{1\,000}"),  # a thousands separator
        ("5", r"\boxed{5 \quad}"),  # trailing spacing
        (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}"),  # a matrix's line break
        ("t^2 - 1", r"\boxed{g(t) = t^2 - 1 = (t - 1)(t + 1)}"),  # a chain of equal expressions
        ("3", r"\boxed{x = 2y = 3}"),  # a side in another variable: y is 3/2
        (r"1 + 3\sqrt{2}", r"\boxed{1+3\\sqrt{2}}"),  # a command escaped twice is no line break
        (r"x \in [-2, 7]", r"\boxed{-2 \\le x \\le 7}"),
        (r"2|x|", r"\boxed{2\lvert x\rvert}"),  # a bar not before a statement
        ("3", r"\boxed{y = |x| = 3}"),
        (r"\begin{pmatrix}1 & 2\end{pmatrix}", r"\boxed{\begin{pmatrix}1&2\end{pmatrix}}"),  # & inside an environment
        (r"2.23\ldots", r"\boxed{2.23\ldots}"),  # a gold written cut accepts the same
    ],
)
def test_one_answer_with_spacing_or_a_consistent_chain_still_scores(gold, answer):
    assert REWARD([answer], solution=[gold]) == [1.0]


def test_separated_looks_at_the_top_level_only():
    assert separated(r"3 \quad 4") and separated(r"4 \\ x = 3") and separated(r"4 \, x = 3")
    assert not separated(r"\{x \mid x > 0\}")
    assert not separated(r"\begin{cases}1 & x > 0 \\ 2 & x \le 0\end{cases}")
    assert not separated(r"5\text{ cm} \times 3\text{ cm}") and not separated(r"x\,dx")
    assert text_key(r"3 \quad 4") != text_key("34")
