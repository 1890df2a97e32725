"""MathAccuracy against a fourth adversarial review: box-drawing constructs the extractor does not read, a percent
gold with another unit, a box option scanned to the end of a long completion, a Fraction gold too long to print.
Each wrong answer has its right answer next to it, so that a fix refusing everything fails too."""

import time
from fractions import Fraction

import pytest

from trl_ext.rewards import MathAccuracy

REWARD = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0)
ANCHORED = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, extraction="anchored")

# a second answer drawn in a frame the extractor does not read: the answers on screen are unknown
UNREAD_FRAMES = [
    r"\boxed{7} or \boxed 9",
    r"\boxed{7} or $\fbox 9$",
    r"\boxed 9 then \boxed{7}",
    "\\boxed{7} and \\boxed%\n{9}",
    r"\boxed{7} or \boxed\infty",
    r"\boxed{7} or \enclose{circle}{9}",
    r"\boxed{7} or \ovalbox{9}",
    r"\boxed{7} or \doublebox{9}",
    r"\boxed{7} or \tcbox[colback=red]{9}",
    "\\boxed{7}\n\\begin{tcolorbox}9\\end{tcolorbox}",
    "\\boxed{7}\n\\begin{mdframed}9\\end{mdframed}",
    r"\boxed{7} \quad \begin{array}{|r|}\hline 9 \\ \hline \end{array}",
]


@pytest.mark.parametrize("completion", UNREAD_FRAMES)
def test_a_frame_left_unread_makes_the_answer_unknown(completion):
    assert REWARD([completion], solution=["7"]) == [-1.0]
    assert ANCHORED([completion + "\nThe answer is 7."], solution=["7"]) == [-1.0]


def test_frames_that_are_read_and_boxes_that_draw_no_frame_still_score():
    completions = [
        r"\boxed{7}",
        r"\fbox{7}",
        r"\framebox[2cm][c]{7}",
        r"\colorbox{yellow}{$7$}",
        r"\boxed{7 \mbox{ m}}",
        r"The table \begin{tabular}{|c|c|}\hline a & b \\ \hline\end{tabular} gives \boxed{7}",
        r"$x \boxtimes y$ so \boxed{7}",
    ]
    assert REWARD(completions, solution=["7"] * len(completions)) == [1.0] * len(completions)


def test_a_long_loop_of_box_options_is_bounded():
    # each "\framebox[" without "]" was scanned to the end of the text: quadratic in the trainer's process
    for command in ("\\framebox[", "\\bbox[", "\\colorbox[", "\\fcolorbox[", "\\framebox[a][", "\\begin{array}{|"):
        start = time.perf_counter()
        REWARD.extract(command * (200_000 // len(command)) + r" \boxed{7}")
        assert time.perf_counter() - start < 5.0  # generous bound; the quadratic scan took over 10 s


@pytest.mark.parametrize("unit", [r"\$4", r"4\text{ cm}", r"4^\circ", r"4\text{ kg}", r"4 \text{ dollars}"])
def test_a_percent_gold_refuses_another_unit(unit):
    assert REWARD([r"\boxed{" + unit + "}"], solution=[r"4\%"]) == [-1.0]


def test_a_percent_gold_accepts_its_number_bare_or_as_a_percentage():
    completions = [r"\boxed{4}", r"\boxed{4\%}", r"\boxed{4 \text{ percent}}"]
    assert REWARD(completions, solution=[r"4\%"] * 3) == [1.0] * 3
    assert ANCHORED(["The answer is 4 cm.", "The answer is 4%."], solution=[r"4\%"] * 2) == [-1.0, 1.0]


def test_a_fraction_gold_too_long_to_print_scores_none():
    golds = [Fraction(1, 7 * 10**4400), Fraction(-(10**4400) - 1, 3), Fraction(1, 7)]
    with pytest.warns(UserWarning, match="too long to print"):
        rewards = REWARD([r"\boxed{0}", r"\boxed{1}", r"\boxed{\frac{1}{7}}"], solution=golds)
    assert rewards == [None, None, 1.0]


@pytest.mark.parametrize(("wrong", "gold"), [("3ᵐ", "3m"), ("yⁿ", "yn"), ("aₖ", "ak"), ("2ʰ", "2h")])
def test_a_superscript_or_subscript_letter_is_no_plain_letter(wrong, gold):
    assert REWARD([r"\boxed{" + wrong + "}"], solution=[gold]) == [-1.0]
    assert ANCHORED([f"The answer is {wrong}."], solution=[gold]) == [-1.0]


def test_a_superscript_letter_is_read_as_a_power():
    rewards = REWARD([r"\boxed{3ᵐ}", r"\boxed{3^m}", r"\boxed{a_k}"], solution=["3^m", "3ᵐ", "aₖ"])
    assert rewards == [1.0, 1.0, 1.0]


def test_unicode_reciprocal_and_greek_letters_read_as_written():
    completions = [r"\boxed{⅟4}", r"\boxed{⅟4}", r"\boxed{3λ}", r"\boxed{3\lambda}", r"\boxed{Λ}"]
    golds = [r"\frac{1}{4}", r"\frac{4}{10}", r"3\lambda", "3λ", r"\Lambda"]
    assert REWARD(completions, solution=golds) == [1.0, -1.0, 1.0, 1.0, 1.0]


def test_a_box_option_never_closed_draws_no_frame():
    # "\framebox[" with no "]" after it is a LaTeX error, not a box on screen: the answer after it is read
    looped = "\\framebox[" * 2000 + r" so \boxed{7}"
    assert REWARD([looped, r"\framebox[3cm]{9} so \boxed{7}"], solution=["7", "7"]) == [1.0, -1.0]
