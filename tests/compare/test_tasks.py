"""The mixed task: shares of too-easy / too-hard prompts, held-out problems never trained on, and its reward."""

from __future__ import annotations

import pytest

from trl_ext.compare.settings import CompareError, CompareSettings, validate
from trl_ext.compare.tasks import (
    MixedTaskReward,
    TaskSpec,
    heldout_prompts,
    mixed_prompts,
    split_problems,
    task_reward_for,
)
from trl_ext.rewards.math import MathAccuracy


def _content(row):
    return row["prompt"][0]["content"]


def test_kinds_have_the_requested_shares_and_held_out_problems_are_never_trained():
    spec = TaskSpec(name="mixed", easy_share=0.4, hard_share=0.2, repeats=2)
    rows = list(mixed_prompts(spec))
    kinds = [row["difficulty"] for row in rows]
    shares = {kind: kinds.count(kind) / len(rows) for kind in ("learnable", "easy", "hard")}
    assert shares == pytest.approx({"learnable": 0.4, "easy": 0.4, "hard": 0.2}, abs=0.01)
    trained, heldout = split_problems(spec.heldout_every)
    assert len(trained) + len(heldout) == 25 and len(heldout) == 9
    held_texts = {_content(row) for row in heldout_prompts(spec)}
    assert held_texts == {f"{a}+{b}" for a, b in heldout}
    assert not held_texts & {_content(row) for row in rows}  # no held-out problem in training, in any kind's form
    learnt = {_content(row) for row in rows if row["difficulty"] == "learnable"}
    assert learnt == {f"{a}+{b}" for a, b in trained}


def test_no_uninformative_prompts_gives_only_learnable_rows():
    rows = list(mixed_prompts(TaskSpec(name="mixed", easy_share=0.0, hard_share=0.0, repeats=1)))
    assert {row["difficulty"] for row in rows} == {"learnable"} and len(rows) == 16


def test_reward_is_constant_on_easy_and_hard_rows_and_the_math_reward_on_learnable_rows():
    calls = []

    class Spy(MathAccuracy):
        def __call__(self, completions, **kwargs):
            calls.append((list(completions), kwargs["solution"]))
            return super().__call__(completions, **kwargs)

    reward = task_reward_for(TaskSpec(name="mixed"), Spy(correct_value=1.0, wrong_value=-1.0))
    completions = [[{"role": "assistant", "content": text}] for text in
                   ("\\boxed{3}", "\\boxed{9}", "\\boxed{4}", "\\boxed{4}", "garbage")]  # fmt: skip
    scores = reward(completions=completions, solution=["\\boxed{3}", "\\boxed{4}", "\\boxed{4}", "\\boxed{1}",
                                                       "\\boxed{2}"],
                    difficulty=["learnable", "learnable", "easy", "hard", "easy"])  # fmt: skip
    assert scores == [1.0, -1.0, 1.0, -1.0, 1.0]  # easy: correct value even for garbage; hard: wrong even if right
    assert len(calls) == 1 and len(calls[0][0]) == 2 and calls[0][1] == ["\\boxed{3}", "\\boxed{4}"]


def test_reward_without_the_difficulty_column_or_with_an_unknown_kind_says_so():
    reward = MixedTaskReward(MathAccuracy())
    with pytest.raises(ValueError, match="difficulty"):
        reward(completions=["x"], solution=["\\boxed{1}"])
    with pytest.raises(ValueError, match="medium"):
        reward(completions=["x"], solution=["\\boxed{1}"], difficulty=["medium"])


def test_demo_task_keeps_the_plain_reward():
    plain = MathAccuracy()
    assert task_reward_for(TaskSpec(name="demo"), plain) is plain


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (TaskSpec(name="sums"), "task"),
        (TaskSpec(name="mixed", easy_share=0.6, hard_share=0.4), "easy_share \\+ hard_share"),
        (TaskSpec(name="mixed", hard_share=-0.1), "hard_share"),
        (TaskSpec(name="mixed", heldout_every=1), "heldout_every"),
    ],
)
def test_bad_task_settings_name_the_field(spec, field):
    with pytest.raises(CompareError, match=field):
        validate(CompareSettings(task=spec))


def test_heldout_accuracy_draws_from_the_fixed_seed_and_leaves_the_training_rng_alone(monkeypatch):
    import types

    import torch

    import trl_ext.evaluation
    from trl_ext.compare.tasks import heldout_accuracy

    rows = []

    def sampling(model, tokenizer, dataset, reward_funcs, **kwargs):  # a draw from the RNG stands for the sampling
        rows.append(len(dataset))
        return types.SimpleNamespace(mean_reward=float(torch.rand(1)))

    monkeypatch.setattr(trl_ext.evaluation, "evaluate_policy", sampling)
    spec = TaskSpec(name="mixed")
    torch.manual_seed(11)
    expected_next = torch.rand(3)
    torch.manual_seed(11)
    first = heldout_accuracy(None, None, spec)
    assert torch.equal(torch.rand(3), expected_next)  # measuring did not advance the training RNG
    torch.manual_seed(99)  # another training state: the evaluation draws the same randomness
    assert heldout_accuracy(None, None, spec) == first
    assert rows == [9, 9]  # the 9 held-out problems only
