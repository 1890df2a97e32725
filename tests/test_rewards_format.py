"""Format rewards, the Magistral gated reward and the overlong-penalty reward."""

import asyncio
import pickle

import pytest
import torch
from trl.trainer.utils import get_callable_name

from trl_ext.core.shaping import overlong_penalty as core_overlong_penalty
from trl_ext.rewards import (
    GatedReward,
    OverlongPenalty,
    ThinkFormat,
    boxed_format,
    code_block_format,
    magistral_math_reward,
    overlong_penalty,
    think_format,
)


def conv(text):
    return [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}]


def test_think_format():
    completions = [
        "<think>reason</think> answer",
        conv("<think>reason</think>\nanswer"),
        "<think>reason</think>",  # no answer
        "<think></think> answer",  # no reasoning
        "<think>a</think><think>b</think> answer",
        "preamble <think>reason</think> answer",
        "reason</think> answer",
    ]
    assert think_format(completions) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    prompt_opened = ThinkFormat(require_open=False)  # the chat template already emitted <think>
    assert prompt_opened(["reason</think> answer", "reason</think>", "<think>x</think> y"]) == [1.0, 0.0, 1.0]


def test_boxed_and_code_block_format():
    assert boxed_format([r"x \boxed{1}", r"<think>\boxed{1}</think> none", r"\boxed{}", r"\boxed{\frac{1}{2}"]) == [
        1.0,
        0.0,
        0.0,
        0.0,
    ]
    code = "```python\nprint(1)\n```"
    assert code_block_format([code, conv(code), "```python\nprint(1)", f"<think>{code}</think> no code"]) == [
        1.0,
        1.0,
        0.0,
        0.0,
    ]


def test_gated_reward_gates_then_grades():
    completions = [
        r"<think>r</think> \boxed{2}",  # format ok, correct
        r"<think>r</think> \boxed{3}",  # format ok, wrong
        r"\boxed{2}",  # no think block: 0 without grading
        r"<think>r</think> 2",  # no box
    ]
    assert magistral_math_reward(completions, solution=["2"] * 4) == pytest.approx([1.0, 0.1, 0.0, 0.0])


def test_gated_reward_grades_only_passing_rows_and_slices_columns():
    seen = {}

    def task(completions, solution, **kwargs):
        seen.update(
            completions=completions, solution=solution, prompts=kwargs["prompts"], state=kwargs["trainer_state"]
        )
        return [None if s == "skip" else 1.0 for s in solution]

    gated = GatedReward(task, [think_format])
    completions = ["<think>a</think> x", "bad", "<think>b</think> y"]
    scores = gated(completions, solution=["s0", "s1", "skip"], prompts=["p0", "p1", "p2"], trainer_state="st")
    assert scores == [pytest.approx(1.0), 0.0, None]
    assert seen == {
        "completions": [completions[0], completions[2]],
        "solution": ["s0", "skip"],
        "prompts": ["p0", "p2"],
        "state": "st",
    }


def test_gated_reward_drives_async_task_rewards():
    async def task(completions, **kwargs):
        await asyncio.sleep(0)
        return [0.5] * len(completions)

    gated = GatedReward(task, [think_format], base=0.0, scale=1.0)
    assert gated(["<think>a</think> x"]) == [0.5]

    async def inside_a_loop():
        return gated(["<think>a</think> x"])

    assert asyncio.run(inside_a_loop()) == [0.5]


def test_overlong_penalty_matches_core_formula():
    reward = overlong_penalty(max_length=10, cache_length=4, max_penalty=0.5)
    ids = [[0] * n for n in (3, 6, 7, 9, 10, 11)]
    expected = core_overlong_penalty(torch.tensor([3, 6, 7, 9, 10, 11]), 10, 4, 0.5).tolist()
    assert reward(["c"] * 6, completion_ids=ids) == pytest.approx(expected)
    assert reward(["c"] * 2, completion_ids=[[0] * 6, [0] * 12]) == pytest.approx([0.0, -0.5])
    with pytest.raises(ValueError, match="completion_ids"):
        reward(["c"])
    with pytest.raises(ValueError, match="cache_length"):
        OverlongPenalty(max_length=4, cache_length=8)


def test_rewards_are_picklable_and_named():
    for reward, name in [
        (think_format, "think_format"),
        (boxed_format, "boxed_format"),
        (code_block_format, "code_block_format"),
        (magistral_math_reward, "magistral_math_reward"),
        (overlong_penalty(8, 2), "overlong_penalty"),
    ]:
        assert get_callable_name(reward) == name
        assert get_callable_name(pickle.loads(pickle.dumps(reward))) == name


def test_bad_completion_type_names_the_row():
    with pytest.raises(ValueError, match="completion 1"):
        think_format(["ok", 42])


def test_format_and_length_terms_are_shaping_and_task_rewards_are_not():
    from trl_ext.rewards import code_tests, magistral_code_reward, math_accuracy

    for shaping in (think_format, boxed_format, code_block_format, overlong_penalty(8, 2)):
        assert getattr(shaping, "trl_ext_shaping", False) is True, shaping
    for task in (math_accuracy, code_tests, magistral_math_reward, magistral_code_reward):
        assert not getattr(task, "trl_ext_shaping", False), task
