"""trl_ext.rewards.MathAccuracy: gold normalisation, answer region, deadlines, threads, dedup, lifecycle."""

import os
import pickle
import subprocess
import sys
import threading
import time
from decimal import Decimal
from fractions import Fraction

import pytest
from trl.trainer.utils import get_callable_name

from trl_ext.rewards import MathAccuracy, math_accuracy
from trl_ext.rewards._math_answers import plain_fraction
from trl_ext.rewards.math import normalize_gold, shared_pool

POWER_TOWER = r"\boxed{10^{10^{10^{10^{10^{10}}}}}}"


def conv(text):
    return [{"role": "assistant", "content": text}]


def test_bare_latex_gold_is_parsed_whole():
    scores = math_accuracy([r"so \boxed{73}", r"so \boxed{73\pi}", r"\boxed{\pi \cdot 73}"], solution=[r"73\pi"] * 3)
    assert scores == [0.0, 1.0, 1.0]


def test_the_trl_bugs_this_fixes():
    from trl.rewards import accuracy_reward

    # TRL 1.16 reads the bare gold `73\pi` as 73, and cannot take plain-text completions
    assert accuracy_reward([conv(r"\boxed{73}"), conv(r"\boxed{73\pi}")], solution=[r"73\pi"] * 2) == [1.0, 0.0]
    with pytest.raises(TypeError):
        accuracy_reward([r"\boxed{73\pi}"], solution=[r"73\pi"])
    assert math_accuracy([conv(r"\boxed{73}"), r"\boxed{73\pi}"], solution=[r"73\pi"] * 2) == [0.0, 1.0]


@pytest.mark.parametrize(
    "gold, expected",
    [
        (r"The answer is \boxed{\frac{1}{2}}.", ((r"\frac{1}{2}",), False)),
        (r"$x^2$", ((r"x^2",), False)),
        ("42", (("42",), False)),
        ("-3.5", (("-3.5",), False)),
        (7, (("7",), False)),
        (r"73\pi", ((r"73\pi",), False)),
        (r"$\boxed{1}\boxed{2}$", (("1", "2"), False)),
        (r"\(\boxed{1}\) and \(\boxed{-2}\)", (("1", "-2"), False)),
        (r"\{3, -1\}", (("3", "-1"), False)),
        ("(1, 2)", (("(1, 2)",), False)),
        (r"x = \pm 2", (("x = + 2", "x = - 2"), False)),
        ("a = 2, b = 3", (("a = 2", "b = 3"), True)),
        (r"1{,}000\%", (("1000\\%",), False)),  # the percent sign is kept: compared in the workers
        (r"\boxed{}", None),
        ("  ", None),
        (None, None),
    ],
)
def test_normalize_gold(gold, expected):
    assert normalize_gold(gold) == expected


def test_plain_text_and_conversational_completions():
    completions = [r"It is \boxed{0.5}", conv(r"It is \boxed{\frac{1}{2}}"), conv("It is one half"), [], "no box 1/2"]
    assert math_accuracy(completions, solution=[r"\frac{1}{2}"] * 5) == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_answer_column_fallback_and_missing_column_error():
    assert math_accuracy([r"\boxed{3}"], answer=["3"]) == [1.0]
    with pytest.raises(ValueError, match=r"`solution` or `answer`"):
        math_accuracy([r"\boxed{3}"], prompt=["q"])
    with pytest.raises(ValueError, match="2 rows but there are 1 completions"):
        math_accuracy([r"\boxed{3}"], solution=["3", "4"])


def test_only_the_answer_region_is_scored():
    completions = [
        r"<think>maybe \boxed{5}</think> The answer is \boxed{6}.",
        r"<think>it is \boxed{6}</think> The answer is \boxed{5}.",
        r"<think>it is \boxed{6} and I keep thinking",  # unfinished reasoning: no answer
        "The answer is 6.",  # no anchored answer: the bare number does not count
    ]
    assert math_accuracy(completions, solution=["6"] * 4) == [1.0, 0.0, 0.0, 0.0]
    whole = MathAccuracy(think_tags=None)
    assert whole([r"<think>\boxed{6}</think> I give up"], solution=["6"]) == [1.0]


def test_anchored_extraction():
    anchored = MathAccuracy(extraction="anchored")
    completions = ["The final answer is $5$.", "I ate 5 apples.", r"\boxed{5}"]
    assert anchored(completions, solution=["5"] * 3) == [1.0, 0.0, 1.0]
    assert math_accuracy(completions, solution=["5"] * 3) == [0.0, 0.0, 1.0]
    both = "The final answer is $2$ and $3$."
    assert anchored([both, both, both], solution=["2, 3", "3", r"\boxed{3}\boxed{2}"]) == [1.0, 0.0, 1.0]


def test_unparseable_gold_scores_none_with_one_warning_naming_it():
    golds = ["See the proof above (unparseable gold test).", r"\boxed{ }", r"\text{see the proof, it is omitted}"]
    with pytest.warns(UserWarning) as caught:
        assert math_accuracy([r"\boxed{1}"] * 4, solution=[*golds, golds[0]]) == [None] * 4
        assert math_accuracy([r"\boxed{2}"], solution=[golds[0]]) == [None]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3
    assert all(sum(repr(gold) in message for message in messages) == 1 for gold in golds), messages


def test_gold_numbers_of_other_types_are_read_exactly():
    import numpy as np

    golds = [np.float32(0.1), np.float16(2.5), Decimal("0.30"), Decimal("12"), Fraction(-3, 4), Fraction(10**400)]
    answers = [r"\boxed{\frac{1}{10}}", r"\boxed{2.5}", r"\boxed{0.3}", r"\boxed{12}", r"\boxed{-0.75}", r"\boxed{3}"]
    assert math_accuracy(answers, solution=golds) == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]  # float32 0.1 printed 0.1000000015
    assert math_accuracy([r"\boxed{0.1000000015}"], solution=[np.float32(0.1)]) == [0.0]


def test_a_gold_written_as_a_sentence_scores_none_not_zero():
    # a short sentence around the number parsed as a product of letters and scored every completion 0
    sentences = ["Hence the result is 12.", "12, because 3 * 4 = 12", "y is 12", "Final: 12 (we get it twice)"]
    with pytest.warns(UserWarning):
        assert math_accuracy([r"\boxed{12}"] * 4, solution=sentences) == [None] * 4
    words = [r"\text{no solution}", "12 \\text{ apples}", r"\text{It is odd}"]
    assert math_accuracy([r"\boxed{No solution}", r"\boxed{12}", r"\boxed{\text{it is odd}}"], solution=words) == [
        1.0,
        1.0,
        1.0,
    ]


def test_configurable_values():
    dapo = MathAccuracy(correct_value=1.0, wrong_value=-1.0)
    assert dapo([r"\boxed{2}", r"\boxed{3}", "none"], solution=["2"] * 3) == [1.0, -1.0, -1.0]


def test_power_tower_returns_within_the_deadline():
    # math-verify's own timeout (inside the 2 s deadline) stops it and the worker survives: scored wrong
    assert MathAccuracy(timeout_s=2.0)([POWER_TOWER, r"\boxed{1}"], solution=["1", "1"]) == [0.0, 1.0]


def test_hard_deadline_kills_and_respawns_the_worker():
    # 0.8 s is below math-verify's own 1 s timeout, so only the hard kill can stop it
    reward = MathAccuracy(timeout_s=0.8, timeout_value=None, num_workers=1)
    reward([r"\boxed{\sqrt{1}}"], solution=["1"])  # start the worker (a plain 1 never reaches it)
    before = shared_pool(1).pids()
    assert reward([POWER_TOWER], solution=["1"]) == [None]  # None: the deadline expired
    assert reward([r"\boxed{\sqrt{1}}"], solution=["1"]) == [1.0]  # a fresh worker took over
    assert shared_pool(1).pids() != before
    shared_pool(1).close()
    assert shared_pool(1).pids() == []


def test_calls_from_threads():
    results = {}

    def work(k):
        results[k] = math_accuracy([rf"\boxed{{\sqrt{{{k * k}}}}}", rf"\boxed{{{k + 1}.0}}"], solution=[str(k)] * 2)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == {k: [1.0, 0.0] for k in range(6)}


def test_identical_pairs_are_verified_once(monkeypatch):
    sent = []
    pool = math_accuracy.pool
    original = pool.map

    def spy(tasks, deadline_s):
        sent.extend(tasks)
        return original(tasks, deadline_s)

    monkeypatch.setattr(pool, "map", spy)
    completions = [r"\boxed{4.0}"] * 6 + [r"\boxed{5.0}"] * 2 + [r"\boxed{4}"]
    assert math_accuracy(completions, solution=["4"] * 9) == [1.0] * 6 + [0.0] * 2 + [1.0]
    assert len(sent) == 2  # and the plain integer is decided without a worker


def test_picklable_and_named_for_trl():
    clone = pickle.loads(pickle.dumps(math_accuracy))
    assert clone([r"\boxed{2}"], solution=["2"]) == [1.0]
    assert get_callable_name(math_accuracy) == "math_accuracy"
    assert get_callable_name(MathAccuracy(name="acc")) == "acc"
    assert math_accuracy([r"\boxed{2}"], solution=["2"], prompts=["q"], completion_ids=[[1]], trainer_state=None) == [
        1.0
    ]


def test_invalid_arguments():
    with pytest.raises(ValueError, match="extraction"):
        MathAccuracy(extraction="anywhere")
    with pytest.raises(ValueError, match="timeout_s"):
        MathAccuracy(timeout_s=0)


def test_workers_exit_with_the_interpreter():
    code = (
        "from trl_ext.rewards import math_accuracy\n"
        "assert math_accuracy([r'\\boxed{\\sqrt{1}}'], solution=['1']) == [1.0]\n"
        "print(' '.join(map(str, math_accuracy.pool.pids())))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)


def test_outcome_shares_are_logged():
    logged = {}
    with pytest.warns(UserWarning, match="See the proof"):
        scores = math_accuracy(
            [r"\boxed{1}", r"\boxed{2}", "no box", r"\boxed{1}"],
            solution=["1", "1", "1", "See the proof."],
            log_metric=logged.__setitem__,
        )
    assert scores == [1.0, 0.0, 0.0, None]
    assert logged == {
        "math_accuracy/correct": 0.25,
        "math_accuracy/wrong": 0.25,
        "math_accuracy/no_answer": 0.25,
        "math_accuracy/timeout": 0.0,
        "math_accuracy/gold_error": 0.25,
    }


@pytest.mark.parametrize(
    "text, value",
    [
        ("-12", Fraction(-12)),
        ("073", Fraction(73)),
        (r"\frac{6}{8}", Fraction(3, 4)),
        (r"-\dfrac{3}{2}", Fraction(-3, 2)),
    ]
    + [("4 / 6", Fraction(2, 3)), ("1/0", None), ("1.5", None), (r"\frac{1}{2}x", None), ("2^3", None), ("3 4", None)],
)
def test_plain_fraction_fast_path_values(text, value):
    assert plain_fraction(text) == value


def test_fast_path_gives_math_verifys_verdict():
    golds = ["073", r"\frac{3}{4}", r"\frac{3}{4}", "-2", r"\frac{2}{3}", "5", r"\frac{1}{2}"]
    answers = ["73", "6/8", "0.75", r"\frac{-4}{2}", "0.67", r"5\text{ cm}", r"\frac{1}{3}"]
    expected = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    assert math_accuracy([rf"\boxed{{{a}}}" for a in answers], solution=golds) == expected
    # the same pairs through math-verify alone (a gold it cannot take as a plain fraction)
    wrapped = [rf"\boxed{{{a} + 0 \cdot \pi}}" for a in answers]
    assert math_accuracy(wrapped, solution=golds)[:5] == expected[:5]


def test_huge_or_many_part_answers_score_wrong_without_hanging():
    spaces = r"\boxed{1" + " " * 200_000 + "2}"  # was quadratic in the trainer's process (no deadline there)
    many = r"\boxed{" + ",".join(str(k) for k in range(40)) + "}"
    hedge = "".join(rf"\boxed{{{k}}} " for k in range(20))
    assert math_accuracy([spaces, many, hedge], solution=["1", "1, 2", "3"]) == [0.0, 0.0, 0.0]
    assert normalize_gold("x" * 3000) is None


def test_many_unclosed_boxes_stay_cheap():
    from trl_ext.rewards._text import last_boxed

    unclosed = r"\boxed{" * 20_000 + r" \boxed{5}"  # each unclosed box used to rescan the rest of the text
    assert last_boxed(unclosed) == "5"
    assert math_accuracy([unclosed], solution=["5"]) == [1.0]
