"""MathAccuracy against an adversarial review: inputs that hung the trainer's process, crashed the reward call,
or scored a wrong answer 1. Each false positive has a right answer next to it so that a fix that rejects
everything fails too."""

import time

import pytest

from trl_ext.rewards import MathAccuracy
from trl_ext.rewards.math import normalize_gold

REWARD = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0)

# inputs that took cubic or quadratic time in the trainer's process (string work before any worker)
SLOW_INPUTS = {
    "set-builder bar, spaces, no closing brace": "\\{x|" + " " * 3000,
    "set-builder mid, spaces, then a letter": "\\{x \\mid" + " " * 3000 + "a",
    "set-builder colon, spaces": "\\{x:" + " " * 3000,
    "digits then a bare circ": "9" * 1990 + "\\circ",
    "digits then deg": "9" * 1990 + "deg",
    "decimal digits then circ": "0." + "3" * 1990 + "\\circ",
}


@pytest.mark.parametrize("content", SLOW_INPUTS.values(), ids=SLOW_INPUTS.keys())
def test_parent_side_string_work_is_bounded(content):
    start = time.perf_counter()
    REWARD.extract("\\boxed{" + content + "}")
    normalize_gold(content)
    # generous bound (a loaded, shared machine): the cubic form took minutes, the linear one milliseconds
    assert time.perf_counter() - start < 5.0


def test_set_builder_still_reads_its_condition():
    rewards = REWARD([r"\boxed{(-1, 3)}", r"\boxed{(-1, 4)}"], solution=[r"\{x \mid -1 < x < 3\}"] * 2)
    assert rewards == [1.0, -1.0]


def test_gold_too_long_to_print_scores_none_instead_of_raising():
    with pytest.warns(UserWarning, match="too long to print"):
        assert REWARD([r"\boxed{3}"], solution=[10**5000]) == [None]


@pytest.mark.parametrize("gold", [float("nan"), float("inf")])
def test_non_finite_float_gold_is_not_an_answer(gold):
    with pytest.warns(UserWarning, match="not a parseable answer"):
        assert REWARD([r"\boxed{" + str(gold) + "}"], solution=[gold]) == [None]


def test_ordered_lists_column_must_be_boolean():
    with pytest.raises(ValueError, match=r"`ordered_lists` row 1 is 'false'"):
        REWARD([r"\boxed{1, 2}"] * 2, solution=["2, 1"] * 2, ordered_lists=[True, "false"])
    assert REWARD([r"\boxed{1, 2}"] * 2, solution=["2, 1"] * 2, ordered_lists=[True, None]) == [-1.0, 1.0]


# gold -> (answers scored 1, answers scored -1)
ROUNDED_GOLDS = {
    "past the largest double": (r"1.23457 \times 10^{400}", [r"1.23457 \times 10^{400}"], [r"10^{500}", r"2^{2000}"]),
    "below the smallest double": (r"1.23457 \times 10^{-400}", [r"1.23457 \times 10^{-400}"], ["0"]),
    "more digits than a double": ("1.0000000000000000001", ["1.0000000000000000001"], ["1"]),
    "a decimal answer is compared as printed": ("0.142857", [r"\frac{1}{7}", "0.142857"], ["0.1428575"]),
    "an exact value that rounds to the gold": (
        r"2.314814814815 \times 10^{-3}",
        [r"\frac{1}{432}"],
        [r"\frac{1}{433}"],
    ),
}
NAMED_SETS = {
    "named values are matched by name": (
        "a=1,b=2;a=3,b=4",
        ["a=1,b=2;a=3,b=4", "b=2,a=1;b=4,a=3"],
        ["b=1,a=2;b=3,a=4"],
    ),
}


@pytest.mark.parametrize("gold, right, wrong", [*ROUNDED_GOLDS.values(), *NAMED_SETS.values()],
                         ids=[*ROUNDED_GOLDS, *NAMED_SETS])  # fmt: skip
def test_wrong_answers_score_wrong(gold, right, wrong):
    answers = [r"\boxed{" + answer + "}" for answer in right + wrong]
    assert REWARD(answers, solution=[gold] * len(answers)) == [1.0] * len(right) + [-1.0] * len(wrong)


def test_ordered_list_with_a_repeated_entry_is_wrong():
    answers = [r"\boxed{10, 4, -2}", r"\boxed{10, 4, -2, 4}", r"\boxed{10, 10, 4, -2}", r"\boxed{\sqrt2, 4, \sqrt2}"]
    golds = ["10, 4, -2"] * 3 + [r"\sqrt2, 4"]
    assert REWARD(answers, solution=golds, ordered_lists=[True] * 4) == [1.0, -1.0, -1.0, -1.0]


WORDS_THAT_CHANGE_THE_VALUE = [
    r"2 \text{ thousand}", r"2\textbf{ thousand}", r"2 \text{ million}", r"2 \text{ dozen}", r"2 \text{ squared}",
    r"2 \text{ halves}", r"2 \text{ minus one}", "2 plus one", r"2\operatorname{lcm}",
    r"2 \text{ maybe}",
]  # fmt: skip


def test_number_and_operation_words_are_not_units():
    answers = [r"\boxed{2 \text{ meters}}", r"\boxed{2 apples}"] + [
        r"\boxed{" + a + "}" for a in WORDS_THAT_CHANGE_THE_VALUE
    ]
    assert REWARD(answers, solution=["2"] * len(answers)) == [1.0, 1.0] + [-1.0] * len(WORDS_THAT_CHANGE_THE_VALUE)


def test_a_missing_ordered_lists_value_takes_the_option():
    reward = MathAccuracy(timeout_s=20.0, ordered_lists=True, correct_value=1.0, wrong_value=-1.0)
    assert reward([r"\boxed{1, 2}"] * 2, solution=["2, 1"] * 2, ordered_lists=[None, False]) == [-1.0, 1.0]
