"""MathAccuracy's anchored extraction (``extraction="anchored"``, a completion without a box), on the third
adversarial review's rows and rows of our own: only a complete answer after the anchor counts; a word before or
after the number that is not a unit, a hedge or a second candidate makes it no answer. Every wrong answer sits next
to a right one, so a rule that rejects everything fails too."""

import pytest

from trl_ext.rewards import MathAccuracy
from trl_ext.rewards._math_anchored import anchored_answer

ANCHORED = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, extraction="anchored")

# what the anchored extraction takes from a region (None: no complete answer)
ANCHORED_TEXT = {
    "Thus the final answer is $12$.": "12",
    "Answer: 12": "12",
    "**Answer:** $\\frac{5}{8}$": "\\frac{5}{8}",
    "The final answer is $12$. I hope it is correct.": "12",
    "The answer is $4$ and $9$.": "4, 9",
    "The answer is 12 apples.": "12 apples",
    "The answer is $12$ meters.": "12 meters",
    "The answer is #### 12": "12",
    "The answer is \\$12.": "\\$12",
    "Final Answer: The largest $k$ is 12.": "12",
    "So the answer: $12$ is the result.": "12",
    "Answer $ 12 $": "12",
    "The answer is $A$ $B$.": "A B",
    "The answer is 12 percent.": "12\\%",
    "The answer is −12.": "-12",
    "The answer is 12².": "12^{2}",
    "Final answer:\n$$x = 12$$": "x = 12",
    # a word around the number that is not a unit
    "The answer is minus 12.": None,
    "The answer is below 12.": None,
    "The answer is all but 12.": None,
    "The answer is 12 at best.": None,
    "The answer is 12 when n is odd.": None,
    "The answer is 12 hundred.": None,
    "The answer is 12 dozen.": None,
    "The answer is 12 cubed.": None,
    "The answer is 12-ish.": None,
    # a hedge, a question, a second candidate, or text between two spans
    "The answer is probably 12.": None,
    "The answer is 12 or so.": None,
    "The answer is 12?": None,
    "The answer is 12. Or 13.": None,
    "The answer is $12$\n\nthough it may be $13$.": None,
    "The answer is $12$ to $13$.": None,
    "The answer is $12$%.": "12\\%",  # graded as 0.12
    "The answer is 12 | 13.": None,
    "The answer is 12; 13.": None,
    "The answer is 13, which is 12.": None,
    "The answer could be 12.": None,
    "If k is odd it is 12.": None,
    "Unless n is odd, the answer is 12.": None,
    "The answer is $12": "\\$12",  # money: no dollar closes it, as Markdown shows it
    "The answer is $12.": "\\$12",
    "**Answer: $12**": "\\$12",
    "The answer is $12 and $13$.": None,  # "12 and " is math that "$13" cannot follow
    "The answer is $\\frac{1}{2}": None,  # math never closed
    "The answer is $12\n$": None,
    # GSM8K's answer line
    "#### 12": "12",
    "She pays 3 * 4 = 12 dollars.\n#### 12": "12",
    "She pays $12 a week.\n#### 12": "12",
    "The answer is 13.\n#### 12": None,  # two anchored answers
    "#### 12\nWait, it is 13.": None,
    "#### Step 2: the sum\nIt is 12.": None,  # a heading
    "The sum is 12.\n##### 12": None,  # five marks: a heading
    "The answer is $\n12\n$": None,  # inline math does not span lines
    "The answer is $$\n12\n$$": "12",
    "I computed 12.": None,
    "The answer is \\boxed{} 12.": None,
    # the anchor after the math it names: the same rules around it
    "Therefore $x \\geq 12$ is the solution.": "x \\geq 12",
    "Thus $12$ is our answer. I hope it is correct.": "12",
    "Hence \\(12\\) is the final answer.": "12",
    "Final Answer: $12$ is the answer.": "12",
    "The answer is 12. So $12$ is the answer.": "12",
    "The answer is 13. So $12$ is the answer.": None,  # two anchored answers
    "If n is odd, $12$ is the answer.": None,
    "My teacher says $12$ is the answer.": None,
    "Then $12$ or $13$ is the answer.": None,
    "So $12$ is the answer? No.": None,
    "$12$ is the answer. Wait, it is $13$.": None,
    "> $12$ is the answer.": None,
    "So f(12) is the answer.": None,  # no math before the anchor: nothing named
    "So \\[12\\] is the answer.": None,  # display math ends a sentence: the anchor names nothing
    "We find that $x < 12$.": None,  # no anchor at all
    "So $13$ is the answer. Hmm. So $12$ is the answer.": None,  # two named answers
    "So $13$ is the answer. The answer is 12.": None,  # a named answer before an anchored one
    "My friend thinks $13$ is the answer. The answer is 12.": None,  # named, whoever names it
    "So $12$ is the answer. The answer is 12.": "12",
}


@pytest.mark.parametrize("region, expected", ANCHORED_TEXT.items(), ids=list(ANCHORED_TEXT))
def test_anchored_answer_is_taken_only_when_complete(region, expected):
    assert anchored_answer(region) == expected


# (gold, anchored completions scored 1, anchored completions scored -1), through the workers
ANCHORED_ROWS = {
    "value words and symbols after the number": (
        "12",
        ["The final answer is 12.", "The final answer is: $12$ cm."],
        [
            "The final answer is 12 thousand.",
            "The final answer is 12%.",
            "The final answer is 12y.",
            "The final answer is 12!.",
        ],
    ),
    "words before the number": (
        "12",
        ["Therefore, the final answer is $12$."],
        ["The final answer is negative 12.", "The final answer is over 12.", "The final answer is surely not 12."],
    ),
    "hedges and second candidates after it": (
        "12",
        ["The answer is $12$.\n\nThis completes the solution."],
        ["The answer is 12. Or perhaps 14.", "The answer is 12 if k is even.", "The answer is likely 12."],
    ),
    "a chain whose values differ (math-verify's anchors took its last side)": (
        "12",
        ["The answer is $x = 5 + 7 = 12$."],
        ["The answer is $x = 13 = 12$.", "The answer is $x = 2 + 3 = 12$."],
    ),
    "a negative answer": ("-12", ["The answer is −12.", "The answer is $-12$."], ["The answer is 12."]),
    "the anchor after the answer": (
        "x > 12",
        ["Therefore $x > 12$ is the solution.", "Thus $(12, \\infty)$ is our answer."],
        ["Therefore $x > 13$ is the solution.", "If $x$ is real, $x > 12$ is the solution."],
    ),
    "two parts": ("4, 9", ["The answer is $4$ and $9$."], ["The answer is $4$ or $9$.", "The answer is $4$."]),
}


@pytest.mark.parametrize("gold, right, wrong", ANCHORED_ROWS.values(), ids=list(ANCHORED_ROWS))
def test_anchored_answers(gold, right, wrong):
    completions = right + wrong
    assert ANCHORED(completions, solution=[gold] * len(completions)) == [1.0] * len(right) + [-1.0] * len(wrong)
