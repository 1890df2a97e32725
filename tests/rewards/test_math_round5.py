"""MathAccuracy against a fifth adversarial review and its re-attack: a letter's case (after a command, spacing or
a font command; written another number of times), numbers of any size beside a variable, named values against an
ordered list, a multi-part answer that restates a part in another form, group and angle nouns after a number,
not-equal and approximately-equal signs, a dangling "or". Each wrong answer has its right answer next to it, so
that a fix refusing everything fails too."""

import pytest

from trl_ext.rewards import MathAccuracy
from trl_ext.rewards._math_normalise import text_key
from trl_ext.rewards._math_values import symbolic_checks_exact

REWARD = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0)
ANCHORED = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, extraction="anchored")

# gold -> (right, wrong): R and r, X and x, \Omega and \omega are two symbols, also after a command and a space
LETTER_CASE = {
    r"\pi R^2 - \pi r^2": (r"\boxed{\pi(R^2 - r^2)}", r"\boxed{0}"),
    r"2\pi r": (r"\boxed{2 r \pi}", r"\boxed{2\pi R}"),
    r"\pi R r": (r"\boxed{\pi r R}", r"\boxed{\pi r^2}"),
    r"y = 2x": (r"\boxed{y = 2 \cdot x}", r"\boxed{y = 2 \cdot X}"),
    r"\omega t": (r"\boxed{t \omega}", r"\boxed{\Omega T}"),
    r"\frac{1}{2} m v^2": (r"\boxed{\frac{m v^2}{2}}", r"\boxed{\frac12 \cdot M \cdot V^2}"),
    # spacing and font commands between a command and the letter, the letter written another number of times
    r"2 \pi r": (r"\boxed{2\pi\,r}", r"\boxed{2\pi\,R}"),
    r"\pi r^2": (r"\boxed{\pi\mathrm{r}^2}", r"\boxed{\pi\mathrm{R}^2}"),
    r"\omega  t": (r"\boxed{\omega\;t}", r"\boxed{\omega\;T}"),
    r"4 \pi r": (r"\boxed{2\pi r + 2\pi r}", r"\boxed{2\pi R + 2\pi R}"),
    r"x^2": (r"\boxed{x \cdot x}", r"\boxed{X \cdot X}"),
    r"2x": (r"\boxed{x + x}", r"\boxed{X + X}"),
}


@pytest.mark.parametrize("gold, right, wrong", [(g, *a) for g, a in LETTER_CASE.items()], ids=list(LETTER_CASE))
def test_a_letter_after_a_command_and_a_space_keeps_its_case(gold, right, wrong):
    assert REWARD([right, wrong], solution=[gold, gold]) == [1.0, -1.0]


def test_the_space_that_ends_a_command_is_kept_in_the_key():
    assert text_key(r"\pi R") == r"\pi{}R" != text_key(r"\pi r")
    assert text_key(r"\angle CBA") == text_key(r"\angle ABC")  # the same angle, named from either side
    assert ANCHORED(["The final answer is $2\\pi R$."], solution=[r"2\pi r"]) == [-1.0]


# gold -> (right, wrong): numbers past float precision in an expression with a variable are compared exactly
LARGE_NUMBERS = {
    r"10^{20}x": (r"\boxed{x \cdot 10^{20}}", r"\boxed{(10^{20}+1)x}"),
    r"(2^{64}-1)x": (r"\boxed{18446744073709551615x}", r"\boxed{2^{64}x}"),
    r"y = 10^{20}x + 1": (r"\boxed{y - 1 = 10^{20}x}", r"\boxed{y = 10^{20}x + 2}"),
    r"x^2+y^2=10^{20}": (r"\boxed{y^2 + x^2 = 10^{20}}", r"\boxed{x^2+y^2=10^{20}+1}"),
    r"a^{10^{20}}": (r"\boxed{a^{100000000000000000000}}", r"\boxed{a^{10^{20}+1}}"),
    r"(1, 10^{20}x)": (r"\boxed{(1, 10^{20}x)}", r"\boxed{(1, (10^{20}+1)x)}"),
    # tiny numbers, long decimals and differences that vanish at any fixed precision
    r"10^{-20}x": (r"\boxed{\frac{x}{10^{20}}}", r"\boxed{(10^{-20}+10^{-40})x}"),
    r"x+1": (r"\boxed{1 + x}", r"\boxed{x+1.0000000000000000001}"),
    r"x\sin(10^{-20})": (r"\boxed{\sin(10^{-20}) x}", r"\boxed{10^{-20}x}"),
    r"\log(10^{20}+1)x": (r"\boxed{x\log(10^{20}+1)}", r"\boxed{\log(10^{20})x}"),
    r"x = 1": (r"\boxed{x = 1}", r"\boxed{x = 1+10^{-20}}"),
    r"\sqrt{2}x": (r"\boxed{\frac{2x}{\sqrt{2}}}", r"\boxed{1.41421356237309504881x}"),
}


@pytest.mark.parametrize("gold, right, wrong", [(g, *a) for g, a in LARGE_NUMBERS.items()], ids=list(LARGE_NUMBERS))
def test_large_numbers_beside_a_variable_are_compared_exactly(gold, right, wrong):
    assert REWARD([right, wrong], solution=[gold, gold]) == [1.0, -1.0]


def test_named_values_do_not_reorder_an_ordered_bare_list():
    ordered = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, ordered_lists=True)
    answers = [r"\boxed{x = 2, x = 1}", r"\boxed{x_1 = 2, x_2 = 1}", r"\boxed{x_1 = 1, x_2 = 2}", r"\boxed{1, 2}"]
    assert ordered(answers, solution=["1, 2"] * 4) == [-1.0, -1.0, 1.0, 1.0]
    # a named gold is still matched by name, in any order
    assert ordered([r"\boxed{b = 3, a = 2}", r"\boxed{b = 2, a = 3}"], solution=["a = 2, b = 3"] * 2) == [1.0, -1.0]


def test_a_part_restated_in_another_form_counts_for_a_gold_of_several_parts():
    # one answer must not fit both multiplicities: 1, 1.0, 2 is three parts (a double root 1, 1, 2), not 1, 2
    answers = [r"\boxed{1, 1.0, 2}", r"\boxed{1, 1.0, 2}", r"\boxed{2, 4, 2^2}", r"\boxed{1, 2, 3, 1.0, 2.0, 3.0}"]
    assert REWARD(answers, solution=["1, 2", "1, 1, 2", "2, 4", "1, 2, 3"]) == [-1.0, 1.0, -1.0, -1.0]
    # a one-part gold restated in another form is still one answer
    assert REWARD([r"\boxed{\frac12} \boxed{0.5}", r"\boxed{(1, 2), (1.0, 2.0)}"], solution=["0.5", "(1, 2)"]) == [
        1.0,
        1.0,
    ]


@pytest.mark.parametrize("noun", ["trios", "quartets", "duos", "twins", "triplets", "reams", "quires"])
def test_a_group_of_fixed_size_changes_the_value(noun):
    assert REWARD([rf"\boxed{{5 \text{{ {noun}}}}}", r"\boxed{5 \text{ apples}}"], solution=["5", "5"]) == [-1.0, 1.0]


@pytest.mark.parametrize("unit", ["semicircles", "quadrants", "sextants"])
def test_another_angle_unit_is_no_plain_number(unit):
    assert REWARD([rf"\boxed{{5 \text{{ {unit}}}}}"], solution=["5"]) == [-1.0]


def test_math_verify_decides_expressions_with_a_variable_symbolically():
    # guard: the numeric check this relies on replacing exists in the installed math-verify
    assert symbolic_checks_exact()


def test_named_entries_of_an_ordered_list_are_named_in_order():
    ordered = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, ordered_lists=True)
    answers = [
        r"\boxed{x_2 = 1, x_1 = 2}",
        r"\boxed{b = 1, a = 2}",
        r"\boxed{x_1 = 1, x_2 = 2}",
        r"\boxed{x = 1, x = 2}",
    ]
    assert ordered(answers, solution=["1, 2"] * 4) == [-1.0, -1.0, 1.0, 1.0]
    assert ordered([r"\boxed{a_3 = 1, a_2 = 2, a_1 = 3}"], solution=["1, 2, 3"]) == [-1.0]


def test_a_plain_number_restated_counts_for_a_gold_of_several_parts():  # decided in the calling process
    answers = [r"\boxed{1, \frac{2}{2}, 2}", r"\boxed{1, \frac{2}{2}, 2}", r"\boxed{3, 5, 03}", r"\boxed{2, \frac42}"]
    assert REWARD(answers, solution=["1, 2", "1, 1, 2", "3, 5", "2"]) == [-1.0, 1.0, -1.0, 1.0]


@pytest.mark.parametrize("noun", ["sextuplets", "septets", "triads", "elevens", "thirteens", "lustrums", "cycles"])
def test_groups_of_fixed_size_by_family(noun):
    assert REWARD([rf"\boxed{{5 \text{{ {noun}}}}}"], solution=["5"]) == [-1.0]


def test_not_equal_and_approximately_equal_signs_are_no_equals_sign():
    answers = [
        r"\boxed{x =/= 3}",
        r"\boxed{x ≃ 3}",
        r"\boxed{x ≒ 3}",
        r"\boxed{x ≅ 3}",
        r"\boxed{x ≟ 3}",
        r"\boxed{x = 3}",
    ]
    assert REWARD(answers, solution=["x = 3"] * 6) == [-1.0] * 5 + [1.0]
    assert ANCHORED(["The answer is $x =/= 3$."], solution=["3"]) == [-1.0]


def test_a_dangling_or_is_a_hedge():
    answers = [r"\boxed{3 \text{ or }}", r"\boxed{\text{or } 3}", r"\boxed{3 \text{ or } 3}", r"\boxed{3,}"]
    assert REWARD(answers, solution=["3"] * 4) == [-1.0, -1.0, 1.0, 1.0]


def test_a_pair_math_verify_cannot_decide_in_time_is_a_verdict_not_a_crash():
    # sympy's solve under math-verify's time limit raised a BaseException that killed the worker twice and the
    # whole reward call with it; definitions of the same function are compared by their right sides
    golds = [r"f(x)=2\sin(2x+\frac{\pi}{6})", r"f(x)=\sin x+\cos x", r"f(x)=\sin x+\cos x", "3"]
    answers = [
        r"\boxed{f(x)=\sqrt3\sin 2x+\cos 2x}",
        r"\boxed{f(x)=\sqrt2\sin(x+\frac{\pi}{4})}",
        r"\boxed{f(x)=\sqrt2\sin(x+\frac{\pi}{3})}",
        r"\boxed{3}",
    ]
    assert REWARD(answers, solution=golds) == [1.0, 1.0, -1.0, 1.0]


def test_an_ordered_list_with_some_entries_named_is_named_in_order():
    ordered = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, ordered_lists=True)
    answers = [
        r"\boxed{x_3 = 1, 2, x_1 = 3}",
        r"\boxed{x_{(2)} = 1, x_{(1)} = 2}",
        r"\boxed{x_{(1)} = 1, x_{(2)} = 2}",
    ]
    assert ordered(answers, solution=["1, 2, 3", "1, 2", "1, 2"]) == [-1.0, -1.0, 1.0]


# a box in the argument of a command that changes or hides what it holds, or in a comment, is not the answer shown
NESTED_OR_HIDDEN = [
    r"$\frac{1}{\boxed{3}}$",
    r"$\sqrt{\boxed{3}}$",
    r"$x^{\boxed{3}}$",
    r"The answer is $4$. $\phantom{\boxed{3}}$",
    r"$$\cancel{\boxed{3}}$$ Wait, that is wrong.",
    r"\sout{\boxed{3}}",
    r"\textcolor{white}{\boxed{3}}",
    r"The answer is $4$. $\color{white}\boxed{3}$",  # a colour switch holds to the end of its group or math
    r"{\color{white} so \boxed{3}}",
    r"\[\color{white}\boxed{3}\]",
    r"\iffalse\boxed{3}\fi",
    r"<!-- \boxed{3} -->",
    r"\begin{comment}\boxed{3}\end{comment}",
]


@pytest.mark.parametrize("completion", NESTED_OR_HIDDEN)
def test_a_box_in_another_commands_argument_or_a_comment_is_no_answer(completion):
    assert REWARD([completion], solution=["3"]) == [-1.0]


# (gold, completion): boxes in bare groups or commands that show their argument, and common final-answer formats
STANDING_BOXES = [
    ("3", r"{\boxed{3}}"),
    ("3", r"{\color{red} x} and \boxed{3}"),  # the switch ended with its group
    ("3", r"$\color{red}{x}$ is marked. The answer is $\boxed{3}$."),  # and with its math
    ("3", r"\textbf{\boxed{3}}"),
    ("3", r"$\displaystyle{\boxed{3}}$"),
    ("3", r"\textbf{Final Answer:} $\boxed{3}$"),
    ("3, 5", "The answers are:\n1. \\boxed{3}\n2. \\boxed{5}\n"),
    ("18", "She earns $18 every day.\n\nTherefore, the answer is \\boxed{18}."),
    ("18", r"She pays $5 for bread and $13 for milk, total $\boxed{18}$."),
    ("3", "**Final Answer**\n\\[\n\\boxed{3}\n\\]"),
    ("3", "\\begin{align*} x &= \\boxed{3} \\end{align*}"),
    ("9", r"Then, $129^{34}+96^{38} \equiv \boxed{9} \pmod{11}.$"),
    ("(2, 2), (6, 2)", r"$$\boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}$$"),
    ("x = 5", r"$$\begin{aligned}\boxed{x=5}\end{aligned}$$"),
    ("2, 5", r"So the answer is $\boxed{2}\boxed{5}$."),
]


@pytest.mark.parametrize("gold, completion", STANDING_BOXES)
def test_a_box_standing_on_its_own_is_read(gold, completion):
    assert REWARD([completion], solution=[gold]) == [1.0]


@pytest.mark.parametrize("noun", ["quartettes", "dyads", "quintuples", "foursomes", "chiliads", "troikas", "tithes"])
def test_more_groups_of_fixed_size(noun):
    assert REWARD([rf"\boxed{{5 \text{{ {noun}}}}}", r"\boxed{5 \text{ chromosomes}}"], solution=["5", "5"]) == [
        -1.0,
        1.0,
    ]


def test_negative_indexes_are_in_order_too():
    ordered = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, ordered_lists=True)
    answers = [r"\boxed{x_{-1} = 1, x_{-2} = 2}", r"\boxed{x_{-2} = 1, x_{-1} = 2}"]
    assert ordered(answers, solution=["1, 2", "1, 2"]) == [-1.0, 1.0]


def test_letters_in_unusual_case_are_variables_not_words():
    # round 6: a word answer folded case, so Xy scored 1 for xy and nM for Nm
    golds = ["xy", "AbC", "Nm", "ABC", "Monday", "Yes", "No"]
    answers = [r"\boxed{Xy}", r"\boxed{aBc}", r"\boxed{nM}", r"\boxed{abc}", r"\boxed{\text{MONDAY}}", r"\boxed{YES}"]
    answers.append(r"\boxed{no}")
    assert REWARD(answers, solution=golds) == [-1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
