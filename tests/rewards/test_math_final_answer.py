"""What counts as a completion's final answer: the last anchored statement only when nothing in the region puts it
in doubt (a lead that is a condition, an attribution, a negation or a quote; a retraction after it; an earlier
anchored answer that differs), the text outside every reasoning block (a stray ``</think>`` hides nothing), and a
malformed message that is no answer rather than an exception. Each wrong answer sits next to a right one, so a
rule that rejects everything fails too."""

import time

import pytest

from trl_ext.rewards import MathAccuracy
from trl_ext.rewards._math_anchored import anchored_answer
from trl_ext.rewards._math_extract import MAX_ANSWER_PARTS, answer_parts
from trl_ext.rewards._text import answer_region, completion_text

ANCHORED = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, extraction="anchored")
BOXED = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0)

# every region states 9 after an anchor: these commit to it (read as 9), NOT_COMMITTED below does not (no answer)
COMMITTED = [
    "The answer is $9$.",
    "Therefore, the final answer is 9.",
    "Final Answer: The final answer is $9$. I hope it is correct.",
    "## Final answer\n\nSo, the answer is $9$.",
    "We get 4 + 5 = 9.\nThus the answer is $9$.\n\nThis completes the solution.",
    "Answer: $9$\n\nAnswer: $9$",  # restated, the same
    "The answer is found by counting the ways to seat the seven guests in a row.\nSo the answer is $9$.",  # prose
    "Final Answer: The final answer is $9$. I hope it is correct. <|im_start|>user",  # a template's token after
    "\\begin{align*} x &= 4 + 5 = 9 \\end{align*} Final Answer: The final answer is $9$.",  # display math ends it
]
NOT_COMMITTED = {
    "a condition without 'if'": "Whenever k is even, the answer is $9$.",
    "a condition in the sentence before": "Assume k were even; then the answer is 9.",
    "a supposition, a colon": "Supposing k is even: the answer is 9.",
    "a supposition, a semicolon": "Take k even; the answer is 9.",
    "attributed": "My friend says the answer is $9$.",
    "attributed, plural": "Several forum posts state the answer is 9.",
    "called a mistake": "A frequent error is to conclude the answer is 9.",
    "negated": "It is not true that the answer is 9.",
    "negated after the anchor": "The answer is not 9.",
    "quoted": 'The key printed "the answer is 9" by mistake.',
    "a number in the lead": "For k = 2 the answer is $9$.",
    "a lead longer than any framing": "Given that " + "the terms keep growing and " * 8 + "the answer is 9.",
    "retracted in words": "The answer is $9$. Wait, no, it's ten.",
    "retracted, a number word": "The answer is 9.\n\nOn second thought, eleven.",
    "doubted after": "The answer is $9$. Hmm, I am not sure about that.",
    "a digit after": "The answer is 9. Then add 2.",
    "an earlier anchored answer": "The answer is 7.\nThe answer is 9.",
    "a later anchored answer": "The answer is 9. The answer is 7.",
    "an earlier anchored list of options": "The answer is (A), (B) or (C). The answer is 9.",
    "an earlier hedged anchored answer": "The answer is 7 or 9. So the answer is 9.",
    "an earlier anchored answer after words": "The answer is: we get $7$.\nSo the answer is $9$.",
    "an earlier word answer": "The answer is no.\nThe answer is 9.",
    "too many anchored statements": "The answer is 9. " * 40,
}


@pytest.mark.parametrize("region", COMMITTED)
def test_a_committed_anchored_answer_is_read(region):
    assert anchored_answer(region) == "9"


@pytest.mark.parametrize("region", NOT_COMMITTED.values(), ids=NOT_COMMITTED.keys())
def test_an_anchored_answer_in_doubt_is_no_answer(region):
    assert anchored_answer(region) is None


def test_anchored_answers_in_doubt_score_wrong_through_the_reward():
    right = [COMMITTED[0], COMMITTED[2]]
    wrong = [NOT_COMMITTED[key] for key in ("attributed", "retracted in words", "an earlier anchored answer")]
    assert ANCHORED(right + wrong, solution=["9"] * 5) == [1.0, 1.0, -1.0, -1.0, -1.0]


REGIONS = {  # completion -> answer region
    "<think>a</think> b": " b",
    "a</think> b": " b",  # the opening tag was in the prompt
    "<think>a</think> x </think> y": " x \n y",  # a stray closing tag hides nothing
    "pre <think>a</think> post": "pre \n post",
    "<think>a</think><think>b</think> c": " c",
    "<think>a</think> b <think> c": None,  # a block opened and never closed
    "<think>a": None,
    "no tags": "no tags",
}


@pytest.mark.parametrize("text, region", REGIONS.items(), ids=list(REGIONS))
def test_the_answer_region_is_the_text_outside_every_reasoning_block(text, region):
    assert answer_region(text) == region


def test_a_stray_closing_tag_does_not_hide_a_box():
    completions = [
        r"<think>work</think> I get \boxed{5}. </think> \boxed{6}",
        r"<think>work</think> \boxed{5}</think>\boxed{6}",
        r"<think>work</think> Hmm.</think> So \boxed{6}.",
        r"work</think>\boxed{6}",
    ]
    assert BOXED(completions, solution=["6"] * 4) == [-1.0, -1.0, 1.0, 1.0]


MALFORMED = {
    "text None": [{"role": "assistant", "content": [{"type": "text", "text": None}]}],
    "content None": [{"role": "assistant", "content": None}],
    "no content": [{"role": "assistant"}],
    "content a number": [{"role": "assistant", "content": 6}],
    "a block that is no dict": [{"role": "assistant", "content": [None, 6]}],
    "a text that is a number": [{"role": "assistant", "content": [{"type": "text", "text": 6}]}],
}


@pytest.mark.parametrize("completion", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_message_is_no_answer_not_an_exception(completion):
    assert completion_text(completion, 0) == ""
    assert BOXED([completion, [{"role": "assistant", "content": r"\boxed{6}"}]], solution=["6", "6"]) == [-1.0, 1.0]


def test_text_blocks_are_read_around_a_null_one():
    blocks = [{"type": "text", "text": None}, {"type": "image"}, {"type": "text", "text": r"\boxed{6}"}]
    assert completion_text([{"role": "assistant", "content": blocks}], 0) == r"\boxed{6}"
    with pytest.raises(ValueError, match="completion 3: expected a string or a list"):
        completion_text(6, 3)  # not a completion at all: a clear error naming it


LONG = {  # ~400 KB completions: repetition loops, unclosed delimiters, many tags
    "plain boxes": r"\boxed{1}" * 45_000,
    "boxes of 17-part lists": (r"\boxed{" + ",".join(["1"] * 17) + "}") * 10_000,
    "anchored sentences": "The answer is 3. " * 25_000,
    "an unclosed display math": "The answer is $$ 3 " * 20_000,
    "a long closing": "The answer is 3. " + "I hope it is correct. " * 20_000,
    "stray closing tags": "<think>a</think>" + r"x \boxed{1}</think>" * 20_000,
    "unclosed boxes": r"\boxed{" * 50_000,
}


@pytest.mark.parametrize("completion", LONG.values(), ids=LONG.keys())
@pytest.mark.parametrize("reward", [BOXED, ANCHORED], ids=["boxed", "anchored"])
def test_time_per_call_on_a_long_completion_is_bounded(reward, completion):
    start = time.perf_counter()
    assert reward([completion], solution=["3"]) == [-1.0]
    # generous bound on a loaded, shared machine: 0.01-0.25 s measured; a 410 KB completion took 7-11 s before
    assert time.perf_counter() - start < 3.0


def test_parts_are_counted_up_to_a_bound_above_any_gold():
    many = ", ".join(str(value) for value in range(1, 25))  # 24 parts: more than the workers parse one by one
    assert BOXED([rf"\boxed{{{many}}}", rf"\boxed{{{many}, 25}}"], solution=[many, many]) == [1.0, -1.0]
    assert answer_parts(r"\boxed{1}" * MAX_ANSWER_PARTS) == ("1",) * MAX_ANSWER_PARTS
    assert answer_parts(r"\boxed{1}" * (MAX_ANSWER_PARTS + 1)) is None
    assert answer_parts(r"\boxed{1, 2}" * (MAX_ANSWER_PARTS // 2 + 1)) is None
