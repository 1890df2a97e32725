"""A currency sign inside the math (``\\frac{1}{2} \\$ = \\frac{10}{9}``: an amount stated equal to a value gives the
value) and a percent sign written outside the math (``$28$ %``, ``$$28$ %$``: inline math wrapped in one more pair
of dollars). Each right form sits next to its near misses: the amount itself, a false equation of bare numbers,
another percentage, the percentage read as a plain number or a hedge, so that accepting everything fails."""

import pytest

from trl_ext.rewards import MathAccuracy
from trl_ext.rewards._math_normalise import amount_stated

# generous deadline: these tests check verdicts on a shared, loaded machine, not speed
BOXED = MathAccuracy(timeout_s=20.0, wrong_value=-1.0)
ANCHORED = MathAccuracy(timeout_s=20.0, wrong_value=-1.0, extraction="anchored")

AMOUNTS = [  # (gold, box content, score)
    ("10/9", r"\frac{1}{2} \$ = \frac{10}{9}", 1.0),
    (r"\frac{10}{9}", r"\$\frac{1}{2} = \frac{10}{9}", 1.0),
    ("500", r"\$5 = 500 \text{ cents}", 1.0),
    ("1/2", r"\frac{1}{2} \$ = \frac{10}{9}", -1.0),  # the amount is what is converted, not the answer
    ("5", r"\$5 = 500 \text{ cents}", -1.0),
    ("10/9", r"\frac{1}{2} = \frac{10}{9}", -1.0),  # bare numbers: a false equation, as before
    ("10/9", r"\frac{10}{9} \$ = \frac{1}{2}", -1.0),
    ("10/9", r"\$\frac{1}{2} = \$\frac{10}{9}", -1.0),  # two amounts that differ
    ("10/9", r"\frac{1}{2} \$ = \frac{10}{9} = 3", -1.0),  # a chain whose values differ
    ("10/9", r"\frac{1}{2} \$ \ge \frac{10}{9}", -1.0),
]


@pytest.mark.parametrize("gold, content, score", AMOUNTS)
def test_an_amount_stated_equal_to_a_value_gives_the_value(gold, content, score):
    assert BOXED([rf"So $\boxed{{{content}}}$."], solution=[gold]) == [score]


def test_an_amount_in_inline_math_after_an_anchor():
    completion = r"The final answer is $ \frac{1}{2} \$ = \frac{10}{9} $."
    assert ANCHORED([completion] * 2, solution=["10/9", "1/2"]) == [1.0, -1.0]


def test_amount_stated_reads_only_an_amount_before_the_sign():
    assert amount_stated(r"\frac{1}{2} \$ = \frac{10}{9}") == r"\frac{10}{9}"
    assert amount_stated(r"\$ 12.5 = 3x") == "3x"
    for kept in (r"x \$ = 3", r"\frac{1}{2} = 3", r"\$5 = \$6", r"\$5 = 6 = 7", r"\$5 = x \le 3", r"2 \$ + 1 = 5"):
        assert amount_stated(kept) == kept


PERCENTAGES = [  # (gold, completion read with anchored extraction, score)
    (r"28\%", "The final answer is $28$ %.", 1.0),
    (r"28\%", r"The final answer is $28$ \%.", 1.0),
    (r"28\%", "The final answer is $28$ percent.", 1.0),
    (r"28\%", "Therefore, the final answer is $$28$ %$.", 1.0),
    ("0.28", "Therefore, the final answer is $$28$ %$.", 1.0),  # an answer's percent is a hundredth
    ("28", "Therefore, the final answer is $$28$ %$.", -1.0),  # 28% is no 28
    (r"28\%", "Therefore, the final answer is $$2$ 8%$.", -1.0),  # digits apart
    (r"28\%", "Therefore, the final answer is $$28$ %$ or $30$ %.", -1.0),
    (r"28\%", "Therefore, the final answer is $$28$ or $30$$.", -1.0),
    (r"28\%", "The final answer is $2$ %.", -1.0),
    (r"28\%", "The final answer is $28$ % of the total, i.e. 30.", -1.0),
]


@pytest.mark.parametrize("gold, completion, score", PERCENTAGES)
def test_a_percent_sign_outside_the_math(gold, completion, score):
    assert ANCHORED([completion], solution=[gold]) == [score]


def test_a_percent_sign_outside_the_math_in_a_box():
    completions = [r"\boxed{$28$ %}", r"\boxed{$28$\%}", r"\boxed{$2$ %}"]
    assert BOXED(completions, solution=[r"28\%"] * 3) == [1.0, 1.0, -1.0]
