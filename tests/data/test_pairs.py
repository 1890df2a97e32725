"""Pair mining on the tiny policy with rigged rewards, and DPO on the mined pairs."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from trl_ext import DPOConfig, DPOTrainer
from trl_ext.data import build_preference_pairs, select_pairs


class RiggedReward:
    """Scores the j-th completion of each prompt with table[prompt][j] and records what it was shown."""

    def __init__(self, table):
        self.table, self.seen = table, defaultdict(list)
        self.__name__ = "rigged"

    def __call__(self, prompts, completions, completion_ids, **columns):
        assert len(completion_ids) == len(completions)
        scores = []
        for prompt, completion in zip(prompts, completions):
            key = prompt if isinstance(prompt, str) else prompt[-1]["content"]
            scores.append(self.table[key][len(self.seen[key])])
            self.seen[key].append(completion)
        return scores


def mine(policy_path, prompts, reward, **kwargs):
    kwargs = {"num_samples": 4, "max_new_tokens": 6, "seed": 0, "show_progress": False, **kwargs}
    return build_preference_pairs(policy_path, Dataset.from_dict(prompts), reward, return_stats=True, **kwargs)


def test_best_vs_worst_with_a_rigged_reward(tiny_policy_path):
    table = {"p0": [0.0, 3.0, 1.0, 2.0], "p1": [1.0] * 4, "p2": [None, 0.5, None, -1.0]}
    reward = RiggedReward(table)
    prompts = {"prompt": ["p0", "p1", "p2"], "answer": ["a0", "a1", "a2"]}
    pairs, stats = mine(tiny_policy_path, prompts, reward, batch_size=2, margin_scale=2.0)
    assert (stats.num_prompts, stats.num_pairs, stats.num_dropped_prompts, stats.num_unscored_completions) == (
        3,
        2,
        1,
        2,
    )
    assert pairs["prompt"] == ["p0", "p2"] and pairs["answer"] == ["a0", "a2"]
    for row, (best, worst) in zip(pairs, [(1, 0), (1, 3)]):
        seen, scores = reward.seen[row["prompt"]], table[row["prompt"]]
        assert row["chosen"] == seen[best] and row["rejected"] == seen[worst]
        assert (row["chosen_score"], row["rejected_score"]) == (scores[best], scores[worst])
        assert row["margin"] == pytest.approx(2.0 * (scores[best] - scores[worst]))
    assert pairs.column_names == ["prompt", "chosen", "rejected", "chosen_score", "rejected_score", "margin", "answer"]


def test_correct_vs_incorrect_conversational(tiny_policy_path):
    table = {"q0": [1.0, 0.0, 1.0, 0.5], "q1": [1.0] * 4}
    reward = RiggedReward(table)
    prompts = {"prompt": [[{"role": "user", "content": q}] for q in ["q0", "q1"]]}
    pairs, stats = mine(tiny_policy_path, prompts, reward, strategy="correct_vs_incorrect", max_pairs_per_prompt=2)
    assert stats.num_dropped_prompts == 1 and len(pairs) == 2  # q1 has no incorrect completion
    seen = reward.seen["q0"]
    assert [(row["chosen"], row["rejected"]) for row in pairs] == [(seen[0], seen[1]), (seen[2], seen[3])]
    assert all(row["chosen"][0]["role"] == "assistant" and row["prompt"][0]["content"] == "q0" for row in pairs)


def test_rewards_are_weighted_and_summed(tiny_policy_path):
    first, second = RiggedReward({"p": [1.0, 0.0, None, 2.0]}), RiggedReward({"p": [0.0, 1.0, None, None]})
    pairs, _ = mine(tiny_policy_path, {"prompt": ["p"]}, [first, second], reward_weights=[1.0, 3.0])
    assert (pairs[0]["chosen_score"], pairs[0]["rejected_score"]) == (3.0, 1.0)  # [1, 3, NaN, 2]


def test_generation_is_batched(tiny_policy_path):
    calls = []
    reward = RiggedReward({f"p{i}": [float(j) for j in range(3)] for i in range(5)})

    def counting(prompts, completions, completion_ids, **columns):
        calls.append(len(completions))
        return reward(prompts, completions, completion_ids, **columns)

    pairs, _ = mine(tiny_policy_path, {"prompt": [f"p{i}" for i in range(5)]}, counting, num_samples=3, batch_size=2)
    assert calls == [6, 6, 3] and len(pairs) == 5


@pytest.mark.parametrize(
    "prompts,kwargs,message",
    [
        ({"prompt": ["a", "b"], "answer": ["1", ""]}, {"gold_columns": "answer"}, "Row 1: the gold column `answer`"),
        ({"prompt": ["a", "b"], "answer": ["1", None]}, {"gold_columns": ["answer"]}, "Row 1: the gold column"),
        ({"prompt": ["a"]}, {"gold_columns": "answer"}, "Gold column"),
        ({"prompt": ["a"]}, {"num_samples": 1}, "num_samples"),
        ({"prompt": ["a"]}, {"strategy": "random"}, "Unknown `strategy`"),
        ({"question": ["a"]}, {}, "needs a `prompt` column"),
        ({"prompt": ["a"], "chosen": ["x"]}, {}, "already has the output column"),
    ],
)
def test_clear_errors(tiny_policy_path, prompts, kwargs, message):
    with pytest.raises(ValueError, match=message):
        mine(tiny_policy_path, prompts, lambda completions, **_: [0.0] * len(completions), **kwargs)


def test_reward_models_must_be_wrapped(tiny_policy_path, tiny_reward_model_path):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(tiny_reward_model_path)
    with pytest.raises(TypeError, match="TRL-protocol reward callable"):
        mine(tiny_policy_path, {"prompt": ["a"]}, model)


def test_select_pairs_edge_cases():
    nan = math.nan
    assert select_pairs([nan, nan], "best_vs_worst") == []
    assert select_pairs([2.0, 2.0, 1.0, 2.0], "best_vs_worst") == [(0, 2)]
    assert select_pairs([0.0, 1.0, 0.2], "correct_vs_incorrect", max_pairs=5) == [(1, 0)]
    assert select_pairs([0.7, 0.4, nan], "correct_vs_incorrect", correct_threshold=0.5) == [(0, 1)]


def test_dpo_on_mined_pairs_runs_with_a_reference_reset(tiny_policy_path, tmp_path):
    def longer_is_better(completions, **_):
        return [float(len(c)) for c in completions]

    prompts = {"prompt": ["What is 12 + 30?", "Compute 7 * 8.", "Solve 2x + 3 = 11.", "The quick brown fox"]}
    pairs, stats = mine(tiny_policy_path, prompts, longer_is_better, max_new_tokens=8, margin_scale=0.01)
    assert stats.num_pairs >= 2
    args = DPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        max_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        ref_reset_steps=1,  # ProRL: the reference becomes the policy after every step, the optimizer restarts
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        save_strategy="no",
    )
    trainer = DPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_policy_path),
        args=args,
        train_dataset=pairs,
        processing_class=AutoTokenizer.from_pretrained(tiny_policy_path),
    )
    initial = {name: p.detach().clone() for name, p in trainer.ref_model.named_parameters()}
    trainer.train()
    policy = dict(trainer.model.named_parameters())
    ref_params = dict(trainer.ref_model.named_parameters())
    assert any(not torch.equal(initial[name], ref_params[name]) for name in initial)  # the reference moved...
    assert all(torch.equal(policy[name], ref_params[name]) for name in ref_params)  # ...onto the policy
    state = [t for s in trainer.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    assert state and all(not t.any() for t in state)  # re-initialised in place by the last reset
    assert trainer.reset_bookkeeping.reset_steps == [1, 2]
    first_log = trainer.state.log_history[0]
    assert "margin" in first_log and first_log["ref_reset/resets"] == 1


def test_dpo_on_mined_conversational_pairs(tiny_policy_path, tmp_path):
    def longer_is_better(completions, **_):
        return [float(len(c[0]["content"])) for c in completions]

    prompts = {"prompt": [[{"role": "user", "content": q}] for q in ["What is 12 + 30?", "Compute 7 * 8."]]}
    pairs, stats = mine(tiny_policy_path, prompts, longer_is_better, max_new_tokens=8)
    assert stats.num_pairs == 2
    args = DPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, use_cpu=True, report_to=[])
    trainer = DPOTrainer(
        model=tiny_policy_path,
        args=args,
        train_dataset=pairs,
        processing_class=AutoTokenizer.from_pretrained(tiny_policy_path),
    )
    assert trainer.train().training_loss > 0
