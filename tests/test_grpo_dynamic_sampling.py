"""Dynamic sampling with refill: the batch bookkeeping (pure) and real refills on the tiny model."""

from __future__ import annotations

import logging

import pytest
import torch

import trl_ext
from tests.scripts.grpo_family import G, length_shaping, recording, scores_dataset, scripted_reward, tiny_args
from trl_ext.trainers import _dynamic_sampling as ds

T, F = True, False


def test_plan_keeps_informative_groups_round_by_round_on_each_rank():
    rounds = [torch.tensor([T, F, F, F]), torch.tensor([F, T, T, T])]  # 2 ranks × 2 groups per round
    assert not ds.rounds_complete(rounds[:1], 2)
    assert ds.rounds_complete(rounds, 2)
    plan = ds.plan_batch(rounds, 2)
    assert [[(r.round, r.group) for r in refs] for refs in plan] == [[(0, 0), (1, 1)], [(1, 0), (1, 1)]]
    assert not any(ref.filled for refs in plan for ref in refs)


def test_plan_fills_with_uninformative_groups_when_rounds_run_out():
    plan = ds.plan_batch([torch.tensor([T, F, F, F])], 2)
    assert plan == [
        [ds.GroupRef(0, 0, False), ds.GroupRef(0, 1, True)],
        [ds.GroupRef(0, 0, True), ds.GroupRef(0, 1, True)],
    ]
    # One rank short is enough to keep every rank generating (the decision is collective).
    assert not ds.rounds_complete([torch.tensor([T, T, T, F])], 2)


def test_planned_total_follows_the_plan_rank_by_rank():
    from types import SimpleNamespace

    from trl_ext.trainers.grpo import GRPOTrainer

    trainer = SimpleNamespace(num_generations=2, accelerator=SimpleNamespace(num_processes=2))
    # Two rounds of 2 ranks × 2 groups × 2 rows; the gathered totals of round k are 100·k + row.
    rounds = [(None, torch.arange(8.0) + 100 * k) for k in range(2)]
    plan = [[ds.GroupRef(0, 1, False), ds.GroupRef(1, 0, True)], [ds.GroupRef(1, 0, False), ds.GroupRef(1, 1, False)]]
    total = GRPOTrainer._planned_total(trainer, rounds, plan)
    nan = float("nan")
    torch.testing.assert_close(total, torch.tensor([2.0, 3.0, nan, nan, 104.0, 105.0, 106.0, 107.0]), equal_nan=True)


def _batch(prompt_lengths, completion_lengths, pad=0, advantage=1.0):
    width_p, width_c = max(prompt_lengths), max(completion_lengths)
    rows = len(prompt_lengths)
    batch = {
        "prompt_ids": torch.full((rows, width_p), pad),
        "prompt_mask": torch.zeros(rows, width_p, dtype=torch.long),
        "completion_ids": torch.full((rows, width_c), pad),
        "completion_mask": torch.zeros(rows, width_c, dtype=torch.long),
        "old_per_token_logps": torch.zeros(rows, width_c),
        "advantages": torch.full((rows,), advantage),
        "num_items_in_batch": torch.tensor(99),
    }
    for i, (lp, lc) in enumerate(zip(prompt_lengths, completion_lengths)):
        batch["prompt_ids"][i, width_p - lp :] = 7
        batch["prompt_mask"][i, width_p - lp :] = 1
        batch["completion_ids"][i, :lc] = 8
        batch["completion_mask"][i, :lc] = 1
        batch["old_per_token_logps"][i, :lc] = -1.0
    return batch


def test_concat_repads_prompts_left_and_completions_right_and_trims():
    first = ds.take_rows(_batch([5, 2], [3, 1]), torch.tensor([1]))  # kept row: prompt 2 of width 5
    second = _batch([3, 1], [2, 4], advantage=2.0)
    merged = ds.concat_batches([first, second], pad_token_id=0)
    assert "num_items_in_batch" not in merged
    assert merged["prompt_mask"].tolist() == [[0, 1, 1], [1, 1, 1], [0, 0, 1]]  # width 5 → 3: common padding trimmed
    assert merged["prompt_ids"].tolist() == [[0, 7, 7], [7, 7, 7], [0, 0, 7]]
    assert merged["completion_mask"].tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
    assert merged["old_per_token_logps"][0].tolist() == [-1.0, 0.0, 0.0, 0.0]
    assert merged["advantages"].tolist() == [1.0, 2.0, 2.0]


def test_take_rows_refuses_keys_it_cannot_merge():
    with pytest.raises(ValueError, match="'pixel_values'.*dynamic_sampling=False"):
        ds.take_rows({"pixel_values": torch.zeros(2, 3)}, torch.tensor([0]))


def test_refill_sampler_is_sharded_like_trl():
    one = ds.refill_batches(10, G, generation_batch_size=8, num_processes=1, rank=0, seed=3)
    two = [ds.refill_batches(10, G, generation_batch_size=8, num_processes=2, rank=r, seed=3) for r in range(2)]
    for _ in range(6):  # crosses an epoch boundary (5 batches of 2 prompts per epoch)
        batch = next(one)
        assert next(two[0]) + next(two[1]) == batch
        assert all(len(set(batch[i : i + G])) == 1 for i in range(0, 8, G))  # whole groups, contiguous


def _ds_trainer(tiny_policy_path, tmp_path, informative_every, seen=None, **overrides):
    args = tiny_args(trl_ext.GRPOConfig, str(tmp_path), dynamic_sampling=True, **overrides)
    trainer_cls = recording(trl_ext.GRPOTrainer, seen) if seen is not None else trl_ext.GRPOTrainer
    return trainer_cls(
        model=tiny_policy_path,
        reward_funcs=scripted_reward,
        args=args,
        train_dataset=scores_dataset(16, informative_every),
    )


def test_refill_keeps_only_informative_groups(tiny_policy_path, tmp_path):
    seen = []
    # 1 prompt in 4 is informative: most rounds need refills; dr_grpo leaves uninformative groups at exactly 0.
    trainer = _ds_trainer(tiny_policy_path, tmp_path, 4, seen, advantage_estimator="dr_grpo", max_steps=3)
    trainer.train()
    assert max(len(batch["rounds"]) for batch in seen) > 1
    for batch in seen:
        output = batch["output"]
        assert output["completion_ids"].shape[0] == 8  # the batch is full again
        assert (batch["advantages"].view(-1, G).abs().sum(dim=1) > 0).all()  # every kept group is informative
        assert int(output["num_items_in_batch"]) == int(output["completion_mask"].sum())
        assert (output["prompt_mask"].sum(dim=1) > 0).all() and output["prompt_mask"][:, 0].any()
    logs = [log for log in trainer.state.log_history if "dynamic_sampling/rounds" in log]
    assert len(logs) == 3
    assert all(log["dynamic_sampling/filled_uninformative"] == 0 for log in logs)
    assert any(log["dynamic_sampling/informative_fraction"] < 1 for log in logs)
    assert [log["dynamic_sampling/rounds"] for log in logs] == [len(batch["rounds"]) for batch in seen]


def _completion_logps(model, output) -> torch.Tensor:
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, output["prompt_ids"].shape[1] - 1 : -1]
    return logits.log_softmax(-1).gather(-1, output["completion_ids"].unsqueeze(-1)).squeeze(-1)


def test_refill_merges_old_and_reference_log_probs(tiny_policy_path, tmp_path):
    seen = []

    class Checked(recording(trl_ext.GRPOTrainer, seen)):
        def generate_and_score(self, inputs):
            output = super().generate_and_score(inputs)
            seen[-1]["fresh_logps"] = _completion_logps(self.model, output)  # the policy that generated them
            return output

    # num_iterations=2 makes TRL compute old log-probs, beta > 0 reference log-probs: both are merged across rounds.
    args = tiny_args(trl_ext.GRPOConfig, str(tmp_path), dynamic_sampling=True, num_iterations=2, beta=0.1)
    trainer = Checked(
        model=tiny_policy_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(16, 4)
    )
    trainer.train()
    merged = [batch for batch in seen if len(batch["rounds"]) > 1]
    assert merged
    for batch in merged:
        output, mask = batch["output"], batch["output"]["completion_mask"].bool()
        for key in ("old_per_token_logps", "ref_per_token_logps"):
            assert output[key].shape == output["completion_ids"].shape
        # Rows re-padded into the merged batch still line up with their tokens: the log-probs TRL computed in each
        # round equal the generating policy's log-probs on the merged batch (the reference is that policy too).
        torch.testing.assert_close(output["old_per_token_logps"][mask], batch["fresh_logps"][mask], atol=1e-4, rtol=0)
        torch.testing.assert_close(output["ref_per_token_logps"][mask], batch["fresh_logps"][mask], atol=1e-4, rtol=0)


def test_iterable_dataset_is_refused(tiny_policy_path, tmp_path):
    args = tiny_args(trl_ext.GRPOConfig, str(tmp_path), dynamic_sampling=True)
    with pytest.raises(ValueError, match="map-style train_dataset"):
        trl_ext.GRPOTrainer(
            model=tiny_policy_path,
            reward_funcs=scripted_reward,
            args=args,
            train_dataset=scores_dataset(16).to_iterable_dataset(),
        )


def test_cap_fills_with_zero_advantage_groups_and_warns(tiny_policy_path, tmp_path, caplog):
    seen = []
    trainer = _ds_trainer(tiny_policy_path, tmp_path, 1000, seen, dynamic_sampling_max_rounds=2, max_steps=1)
    with caplog.at_level(logging.WARNING, logger="trl_ext.trainers.grpo"):
        trainer.train()
    (batch,) = seen
    assert len(batch["rounds"]) == 2
    (log,) = [log for log in trainer.state.log_history if "dynamic_sampling/rounds" in log]
    filled = log["dynamic_sampling/filled_uninformative"]
    assert filled >= 1 and log["dynamic_sampling/rounds"] == 2
    assert (batch["advantages"].view(-1, G).abs().sum(dim=1) == 0).sum() >= filled
    assert "uninformative group(s) were kept" in caplog.text


def test_cap_can_raise(tiny_policy_path, tmp_path):
    trainer = _ds_trainer(
        tiny_policy_path, tmp_path, 1000, dynamic_sampling_max_rounds=1, dynamic_sampling_on_exhausted="raise"
    )
    with pytest.raises(RuntimeError, match="dynamic_sampling_on_exhausted='raise'"):
        trainer.train()


def test_filter_metric_defaults_to_task_rewards(tiny_policy_path, tmp_path):
    args = tiny_args(trl_ext.DAPOConfig, str(tmp_path))
    trainer = trl_ext.DAPOTrainer(
        model=tiny_policy_path,
        reward_funcs=[scripted_reward, length_shaping],
        args=args,
        train_dataset=scores_dataset(16),
    )
    assert trainer.reward_func_names == ["scripted_reward", "length_shaping", "soft_overlong_punishment"]
    assert trainer._filter_columns == [0]


def test_unknown_filter_reward_is_named(tiny_policy_path, tmp_path):
    with pytest.raises(ValueError, match="'accuracy'.*scripted_reward"):
        _ds_trainer(tiny_policy_path, tmp_path, 1, dynamic_sampling_reward_funcs=["accuracy"])


def test_trl_overlong_punishment_is_shaping_and_not_added_twice(tiny_policy_path, tmp_path):
    from trl.rewards import get_soft_overlong_punishment

    trl_punishment = get_soft_overlong_punishment(8, 2)
    named = tiny_args(trl_ext.GRPOConfig, str(tmp_path), dynamic_sampling_reward_funcs="scripted_reward")
    assert named.dynamic_sampling_reward_funcs == ["scripted_reward"]
    args = tiny_args(trl_ext.GRPOConfig, str(tmp_path), dynamic_sampling=True)
    trainer = trl_ext.GRPOTrainer(
        model=tiny_policy_path,
        reward_funcs=[trl_punishment, scripted_reward],
        args=args,
        train_dataset=scores_dataset(8),
    )
    assert trainer._filter_columns == [1]
    with pytest.raises(ValueError, match="count twice"):
        trl_ext.DAPOTrainer(
            model=tiny_policy_path,
            reward_funcs=[scripted_reward, trl_punishment],
            args=tiny_args(trl_ext.DAPOConfig, str(tmp_path)),
            train_dataset=scores_dataset(8),
        )


def test_magistral_standardises_the_refilled_batch(tiny_policy_path, tmp_path):
    seen = []
    args = tiny_args(trl_ext.MagistralConfig, str(tmp_path), max_steps=3, soft_overlong_punishment=False)
    trainer = recording(trl_ext.MagistralTrainer, seen)(
        model=tiny_policy_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(16, 4)
    )
    trainer.train()
    assert max(len(batch["rounds"]) for batch in seen) > 1
    for batch in seen:
        advantages = batch["advantages"]
        # Zero-advantage groups were dropped and refilled; the kept batch is standardised as one minibatch.
        assert (advantages.view(-1, G).abs().sum(dim=1) > 0).all()
        assert abs(float(advantages.mean())) < 1e-5
        assert float(advantages.std()) == pytest.approx(1.0, abs=1e-3)


def test_length_penalty_reward_is_shaping_and_never_filters():
    from trl_ext.rewards import OverlongPenalty, math_accuracy
    from trl_ext.trainers.grpo import is_shaping_reward

    assert is_shaping_reward(OverlongPenalty(max_length=16, cache_length=4))
    assert not is_shaping_reward(math_accuracy)


def test_resume_with_refills_reproduces_the_uninterrupted_run(tiny_policy_path, tmp_path):
    """The refill sampler's position is checkpointed: a resumed run draws the same refill prompts."""
    full = _ds_trainer(tiny_policy_path, tmp_path / "full", 4, advantage_estimator="dr_grpo", max_steps=4,
                       save_strategy="steps", save_steps=2)  # fmt: skip
    full.train()
    resumed = _ds_trainer(tiny_policy_path, tmp_path / "resumed", 4, advantage_estimator="dr_grpo", max_steps=4)
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-2"))
    rounds = [[log["dynamic_sampling/rounds"] for log in t.state.log_history if "dynamic_sampling/rounds" in log]
              for t in (full, resumed)]  # fmt: skip
    # the resumed history holds the checkpoint's two logged steps, then its own; refills happen after step 2 too
    assert max(rounds[0][2:]) > 1 and rounds[1] == rounds[0]
    for a, b in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
