"""Dynamic sampling with refill: the batch bookkeeping (pure) and real refills on the tiny model."""

from __future__ import annotations

import logging
import math

import pytest
import torch

import trl_ext
from tests.scripts.grpo_family import G, length_shaping, recording, scores_dataset, scripted_reward, tiny_args
from trl_ext.trainers import _dynamic_sampling as ds

T, F = True, False


def test_plan_keeps_each_ranks_own_informative_groups_round_by_round():
    rounds = [torch.tensor([T, F, F, F]), torch.tensor([F, T, T, T])]  # 2 ranks × 2 groups per round
    assert ds.missing_groups(rounds[:1], 2, needed=2) == 3  # the batch needs 4, both ranks together hold 1
    assert ds.missing_groups(rounds, 2, needed=2) == 0
    plan = ds.plan_batch(rounds, 2, needed=2)
    assert [[(r.round, r.rank, r.group) for r in refs] for refs in plan] == [
        [(0, 0, 0), (1, 0, 1)],
        [(1, 1, 0), (1, 1, 1)],
    ]  # each rank held 2: nothing moves
    assert not any(ref.filled for refs in plan for ref in refs)


def test_plan_pools_informative_groups_over_ranks():
    # round 0: 2 groups per rank (rank 0: 2 informative, rank 1: 1); round 1: 1 group per rank (rank 0's informative)
    rounds = [torch.tensor([T, T, T, F]), torch.tensor([T, F])]
    assert ds.missing_groups(rounds[:1], 2, needed=2) == 1  # decided from the global count, not the emptiest rank
    assert ds.missing_groups(rounds, 2, needed=2) == 0  # rank 1 holds 1 but rank 0's surplus covers it
    plan = ds.plan_batch(rounds, 2, needed=2)
    assert plan[0] == [ds.GroupRef(0, 0, 0, False), ds.GroupRef(0, 0, 1, False)]
    assert plan[1] == [ds.GroupRef(0, 1, 0, False), ds.GroupRef(1, 0, 0, False)]  # rank 0's round-1 group moves
    rows = ds.kept_gathered_rows(plan, [2, 1], G)
    assert rows[2 * G] == (0, 2 * G) and rows[3 * G] == (1, 0)  # the moved group: rank 0's rows of round 1


def test_plan_takes_rounds_of_any_size_and_fills_when_they_run_out():
    # round 0: 2 groups per rank; round 1: 3 groups per rank; each rank needs 3; rank 0 found 4, rank 1 none
    rounds = [torch.tensor([T, T, F, F]), torch.tensor([T, F, T, F, F, F])]
    assert ds.missing_groups(rounds, 2, needed=3) == 2
    plan = ds.plan_batch(rounds, 2, needed=3)
    assert plan[0] == [ds.GroupRef(0, 0, 0, False), ds.GroupRef(0, 0, 1, False), ds.GroupRef(1, 0, 0, False)]
    # rank 1 gets rank 0's surplus and fills the rest with its own first uninformative groups
    assert plan[1] == [ds.GroupRef(0, 1, 0, True), ds.GroupRef(0, 1, 1, True), ds.GroupRef(1, 0, 2, False)]
    # in the gathered tensors: rank 1's round-0 group 0 starts at row (1·2 + 0)·G of round 0; the moved group is
    # rank 0's round-1 group 2, row (0·3 + 2)·G of round 1
    rows = ds.kept_gathered_rows(plan, [2, 3], G)
    assert rows[3 * G] == (0, 2 * G) and rows[5 * G] == (1, 2 * G) and len(rows) == 6 * G


@pytest.mark.parametrize("missing, processes, expected", [(3, 2, 2), (4, 2, 2), (1, 2, 1), (0, 2, 0), (5, 1, 5)])
def test_each_rank_generates_its_share_of_the_missing_groups(missing, processes, expected):
    assert ds.groups_per_rank(missing, processes) == expected


@pytest.mark.parametrize(
    "missing, rate, cap, expected",
    [(8, 1.0, 64, 8), (8, 0.5, 64, 16), (3, 0.25, 64, 12), (3, 0.3, 64, 10), (8, 0.01, 20, 20), (1, 0.9, 64, 2)],
)
def test_round_size_is_missing_groups_over_the_rate(missing, rate, cap, expected):
    assert ds.round_groups(missing, rate, cap) == expected


def test_round_margin_adds_standard_deviations_of_the_informative_count():
    # 16 missing at rate 0.25: sd of the informative count √(16·0.75) ≈ 3.46; one sd → ⌈19.46 / 0.25⌉ = 78 groups
    assert ds.round_groups(16, 0.25, 1000, margin=1.0) == 78
    assert ds.round_groups(16, 0.25, 1000, margin=0.5) == math.ceil((16 + 0.5 * math.sqrt(12)) / 0.25)
    assert ds.round_groups(16, 1.0, 1000, margin=2.0) == 16  # a certain rate needs no margin


def test_rate_estimate_weighs_recent_rounds_and_round_trips():
    estimate = ds.RateEstimate(decay=0.5)
    assert estimate.value == 1.0
    estimate.update(2, 8)
    estimate.update(8, 8)
    assert estimate.value == pytest.approx((0.5 * 2 + 8) / (0.5 * 8 + 8))
    restored = ds.RateEstimate(decay=0.5)
    restored.load_state_dict(estimate.state_dict())
    assert restored.value == estimate.value


def test_refill_sampler_is_sharded_like_trl():
    one = ds.refill_groups(10, G, generation_batch_size=8, num_processes=1, rank=0, seed=3)
    two = [ds.refill_groups(10, G, generation_batch_size=8, num_processes=2, rank=r, seed=3) for r in range(2)]
    for _ in range(6):  # crosses an epoch boundary (5 batches of 2 prompts per epoch)
        assert [next(one), next(one)] == [next(two[0]), next(two[1])]


def _skip_reference(streak, p, floor=0.01):
    return 1.0 - max(p**streak, floor)


@pytest.mark.parametrize("p", [0.05, 0.5, 0.95, 1.0])
def test_greso_skip_probability_matches_reference(p):
    from trl_ext.core.prompt_skipping import greso_skip_probability

    streaks = torch.tensor([0, 1, 2, 3, 7, 50])
    expected = [_skip_reference(int(z), p) for z in streaks]
    assert greso_skip_probability(streaks, p).tolist() == pytest.approx(expected, abs=1e-12)
    assert greso_skip_probability(streaks, p)[0] == 0.0  # never skipped before a zero-variance rollout
    assert float(greso_skip_probability(torch.tensor([50]), 0.5)) == pytest.approx(0.99)  # min rollout rate
    with pytest.raises(ValueError, match="exploration"):
        greso_skip_probability(streaks, 0.0)


@pytest.mark.parametrize(
    "p, rate, target, expected",
    [
        (0.5, 0.30, 0.25, 0.49),
        (0.5, 0.25, 0.25, 0.49),
        (0.5, 0.10, 0.25, 0.51),
        (0.05, 0.9, 0.25, 0.05),
        (0.95, 0.0, 0.25, 0.95),
    ],
)
def test_greso_exploration_moves_towards_the_target(p, rate, target, expected):
    from trl_ext.core.prompt_skipping import greso_adjust_exploration

    assert greso_adjust_exploration(p, rate, target) == pytest.approx(expected)


def test_prompt_skipper_history_decisions_and_state():
    from trl_ext.trainers._prompt_skipping import PromptSkipper, prompt_key

    assert prompt_key("What is 1 + 1?") == prompt_key("What is 1 + 1?") != prompt_key("What is 1 + 2?")
    assert prompt_key([{"role": "user", "content": "hi"}]) == prompt_key([{"content": "hi", "role": "user"}])
    skipper = PromptSkipper(target_informative_rate=0.75, exploration=0.5, min_rollout=0.01, seed=0)
    skipper.record(["a", "b", "a"], [False, True, False])
    assert skipper.streaks == {"a": 2, "b": 0}
    assert not any(skipper.should_skip("b", step) for step in range(50))  # informative last time: never skipped
    skip_rate = sum(skipper.should_skip("a", step) for step in range(2000)) / 2000
    assert skip_rate == pytest.approx(0.75, abs=0.04)  # 1 − 0.5²
    skipper.adjust()  # 2 of 3 rolled-out prompts were zero-variance, above the 0.25 target: skip more
    assert skipper.exploration == pytest.approx(0.49)
    clone = PromptSkipper(0.75, 0.5, 0.01, seed=0)
    clone.load_state_dict(skipper.state_dict())
    assert [clone.should_skip("a", s) for s in range(30)] == [skipper.should_skip("a", s) for s in range(30)]


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"prompt_skipping": "greso"}, "prompt_skipping"),
        ({"dynamic_sampling": True, "prompt_skipping": "greso", "prompt_skipping_target_informative_rate": 0.0},
         "prompt_skipping_target_informative_rate"),
        ({"dynamic_sampling": True, "prompt_skipping": "greso", "prompt_skipping_target_informative_rate": 1.5},
         "prompt_skipping_target_informative_rate"),
        ({"dynamic_sampling": True, "prompt_skipping": "greso", "prompt_skipping_exploration": 1.0},
         "prompt_skipping_exploration"),
        ({"dynamic_sampling": True, "prompt_skipping": "gresso"}, "prompt_skipping"),
        ({"dynamic_sampling": True, "dynamic_sampling_max_round_groups": 0}, "dynamic_sampling_max_round_groups"),
        ({"dynamic_sampling": True, "dynamic_sampling_round_margin": -1.0}, "dynamic_sampling_round_margin"),
    ],
)  # fmt: skip
def test_bad_prompt_skipping_settings_name_the_field(tmp_path, overrides, field):
    with pytest.raises(ValueError, match=field):
        tiny_args(trl_ext.GRPOConfig, str(tmp_path), **overrides)
    # a target rate of exactly 1 is allowed
    tiny_args(trl_ext.GRPOConfig, str(tmp_path), dynamic_sampling=True, prompt_skipping="greso",
              prompt_skipping_target_informative_rate=1.0)  # fmt: skip


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
    zero_groups = batch["advantages"].view(-1, G).abs().sum(dim=1) == 0
    assert zero_groups.sum() >= filled
    assert "uninformative group(s) were kept" in caplog.text
    # Filled groups neither add gradient nor dilute it: their tokens are out of the loss and its normaliser.
    mask = batch["output"]["completion_mask"].view(-1, G, batch["output"]["completion_mask"].shape[-1])
    assert mask[zero_groups].sum() == 0 and (mask[~zero_groups].sum(dim=-1) > 0).all()
    assert int(batch["output"]["num_items_in_batch"]) == int(mask.sum())


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


def _ds_logs(trainer, key):
    return [log[key] for log in trainer.state.log_history if key in log]


def test_resume_with_refills_and_prompt_skipping_reproduces_the_uninterrupted_run(tiny_policy_path, tmp_path):
    """The refill position, the informative-rate estimate and the prompt history are checkpointed: a resumed run
    generates the same rounds, skips the same prompts and ends with the same weights."""
    settings = dict(advantage_estimator="dr_grpo", max_steps=6, prompt_skipping="greso")
    full = _ds_trainer(tiny_policy_path, tmp_path / "full", 4, save_strategy="steps", save_steps=3, **settings)
    full.train()
    resumed = _ds_trainer(tiny_policy_path, tmp_path / "resumed", 4, **settings)
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-3"))
    # the resumed history holds the checkpoint's logged steps, then its own
    for key in ("generated_groups", "used_groups", "skipped_prompts", "informative_rate_estimate"):
        assert _ds_logs(resumed, f"dynamic_sampling/{key}") == _ds_logs(full, f"dynamic_sampling/{key}"), key
    generated, used = (
        _ds_logs(full, "dynamic_sampling/generated_groups"),
        _ds_logs(full, "dynamic_sampling/used_groups"),
    )
    assert sum(generated[3:]) > sum(used[3:])  # refills after the checkpoint too
    assert sum(_ds_logs(full, "dynamic_sampling/skipped_prompts")[3:]) > 0
    assert resumed._skipper.state_dict() == full._skipper.state_dict()
    for a, b in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


class RowCounter:
    """Counts rows independently of the trainer's metrics: generated (``generate``), through a no-grad forward
    outside generation (old/reference log-probs), through a forward with gradients (trained), and scored."""

    def __init__(self, model):
        self.generated = self.logprob = self.trained = self.scored = 0
        self._generating = False
        generate = model.generate

        def counting_generate(*args, **kwargs):
            self.generated += kwargs["input_ids"].shape[0]
            self._generating = True
            try:
                return generate(*args, **kwargs)
            finally:
                self._generating = False

        model.generate = counting_generate
        model.register_forward_pre_hook(self._forward, with_kwargs=True)

    def _forward(self, module, args, kwargs):
        rows = kwargs["input_ids"].shape[0] if "input_ids" in kwargs else args[0].shape[0]
        if torch.is_grad_enabled():
            self.trained += rows
        elif not self._generating:
            self.logprob += rows

    def reward(self, completions, scores, **kwargs):
        self.scored += len(completions)
        return scripted_reward(completions, scores, **kwargs)


@pytest.mark.parametrize("informative_every", [2, 4])
def test_log_probs_only_for_trained_rows_and_generation_sized_to_the_rate(
    tiny_policy_path, tmp_path, informative_every
):
    """1 prompt in 2 (or 4) is informative. Rounds only generate and score; TRL's old-log-prob pass (two optimizer
    steps per generation batch) and the training forward see exactly the kept rows, every generated row is scored
    once, and the rows generated per row trained stay within 1.2 / informative rate."""
    rate = 1 / informative_every
    args = tiny_args(
        trl_ext.DAPOConfig, str(tmp_path), per_device_train_batch_size=32, steps_per_generation=2, max_steps=8,
        soft_overlong_punishment=False,
    )  # fmt: skip
    counter = None

    def scripted_reward(completions, scores, **kwargs):  # TRL names reward functions after __name__
        return counter.reward(completions, scores, **kwargs)

    trainer = trl_ext.DAPOTrainer(
        model=tiny_policy_path,
        reward_funcs=scripted_reward,
        args=args,
        train_dataset=scores_dataset(64, informative_every),
    )
    counter = RowCounter(trainer.model)
    trainer.train()
    assert counter.trained == 8 * 32
    assert counter.logprob == counter.trained  # no log-prob pass for a dropped group
    assert counter.scored == counter.generated  # no reward function ran twice for a row
    assert counter.generated / counter.trained <= 1.2 / rate, (counter.generated, counter.trained)
    generated = sum(_ds_logs(trainer, "dynamic_sampling/generated_groups")) * G
    assert generated == counter.generated and sum(_ds_logs(trainer, "dynamic_sampling/used_groups")) * G == 4 * 64
    assert _ds_logs(trainer, "dynamic_sampling/informative_rate_estimate")[-1] == pytest.approx(rate, abs=0.2)
    assert _ds_logs(trainer, "dynamic_sampling/rounds")[-1] <= 2


def test_logs_describe_the_trained_batch(tiny_policy_path, tmp_path):
    """reward, reward_std, frac_reward_zero_std, rewards/* and the completions table are of the kept rows."""
    seen = []
    trainer = _ds_trainer(tiny_policy_path, tmp_path, 4, seen, advantage_estimator="rloo", max_steps=3)
    trainer.train()
    logs = [log for log in trainer.state.log_history if "dynamic_sampling/rounds" in log]
    assert sum(log["dynamic_sampling/generated_groups"] for log in logs) > sum(
        log["dynamic_sampling/used_groups"] for log in logs
    )  # groups were dropped, yet:
    for log, batch in zip(logs, seen, strict=True):
        kept = batch["output"]
        assert log["frac_reward_zero_std"] == 0.0  # only informative groups were trained
        advantages = batch["advantages"]
        assert (advantages.view(-1, G).abs().sum(dim=1) > 0).all()
        assert log["completions/mean_length"] == pytest.approx(
            float(kept["completion_mask"].sum(dim=1).float().mean())
        )
    last = seen[-1]
    rewards = list(trainer._logs["rewards"]["scripted_reward"])
    assert len(trainer._logs["prompt"]) >= 8 and len(rewards) == len(trainer._logs["advantages"])
    # the table's last rows are the last trained batch, with trl_ext's RLOO advantages
    assert list(trainer._logs["advantages"])[-8:] == pytest.approx(last["advantages"].tolist())
    batch_rewards = torch.tensor(rewards[-8:])
    assert logs[-1]["reward"] == pytest.approx(float(batch_rewards.mean()))
    assert logs[-1]["reward_std"] == pytest.approx(float(batch_rewards.std()))


def test_prompt_skipping_skips_prompts_that_taught_nothing(tiny_policy_path, tmp_path):
    seen = []
    # 16 prompts, 1 in 4 informative: the uninformative ones come back and are skipped
    trainer = _ds_trainer(tiny_policy_path, tmp_path, 4, seen, max_steps=8, prompt_skipping="greso")
    trainer.train()
    skipped = _ds_logs(trainer, "dynamic_sampling/skipped_prompts")
    assert skipped[0] == 0 and sum(skipped) > 0
    streaks = trainer._skipper.streaks
    data = scores_dataset(16, 4)
    from trl_ext.trainers._prompt_skipping import prompt_key

    informative = {prompt_key(row["prompt"]) for row in data if row["pid"] % 4 == 0}
    assert streaks and all(streaks[key] == 0 for key in informative if key in streaks)
    assert any(value > 0 for key, value in streaks.items() if key not in informative)
    assert _ds_logs(trainer, "dynamic_sampling/exploration_probability")[-1] < 0.5  # zero-variance rate > 0.25
    for batch in seen:  # still only informative groups trained
        assert (batch["advantages"].view(-1, G).abs().sum(dim=1) > 0).all()


class _FakeLLM:
    """A colocated vLLM engine's sleep interface."""

    def __init__(self):
        self.asleep, self.calls = True, []

    def sleep(self, level):
        self.calls.append(f"sleep{level}")
        self.asleep = True

    def wake_up(self, tags):
        self.calls.append(f"wake:{','.join(tags)}")
        self.asleep = False


class _FakeVLLMGeneration:
    """What TRL 1.16's VLLMGeneration does with sleep mode (the guard test checks TRL still does it)."""

    mode, enable_sleep_mode = "colocate", True

    def __init__(self):
        self.llm, self._llm_weights_sleeping, self.pushes = _FakeLLM(), True, 0

    def sync_weights(self):
        self.llm.wake_up(tags=["weights"])
        self._llm_weights_sleeping = False
        self.pushes += 1

    def generate(self):
        if self._llm_weights_sleeping:
            self.sync_weights()
        self.llm.wake_up(tags=["kv_cache"])
        assert not self.llm.asleep
        self.llm.sleep(level=2)
        self._llm_weights_sleeping = True


def test_vllm_colocate_sleep_mode_pushes_weights_once_per_step():
    from types import SimpleNamespace

    from trl_ext.trainers._trl_hooks import HookState, vllm_sleep_once

    generation = _FakeVLLMGeneration()
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=generation, hook_state=HookState())

    def step_rounds(rounds, step):
        for _ in range(rounds):  # as TRL's _generate_single_turn, then trl_ext's hook
            if step != trainer.last_step:
                generation.sync_weights()
                trainer.last_step = step
            generation.generate()
            if trainer.hook_state.vllm_rounds is not None:
                trainer.hook_state.vllm_rounds.after_generate()

    trainer.last_step = -1
    step_rounds(3, step=0)  # without trl_ext: each round after the first re-pushes the discarded weights
    assert generation.pushes == 3
    for step in (1, 2):
        before = len(generation.llm.calls)
        with vllm_sleep_once(trainer):
            step_rounds(3, step)
        # woken once, generated three times, put to sleep once; asleep (weights discarded) between steps
        assert generation.llm.calls[before:] == ["wake:weights", "wake:kv_cache", "sleep2"]
        assert generation.llm.asleep and generation._llm_weights_sleeping
    assert generation.pushes == 3 + 2  # one push per step
    assert trainer.hook_state.vllm_rounds is None


vllm_gpu = pytest.mark.vllm_gpu  # deselected, not skipped, where vLLM or a GPU is missing (tests/conftest.py)


@vllm_gpu
@pytest.mark.parametrize("sleep_mode", [False, True])
def test_dynamic_sampling_with_vllm_colocate(tmp_path, sleep_mode):
    """On a GPU with vLLM: refill rounds generate with a colocated engine, log-probs only for kept rows, and with
    sleep mode the weights are pushed once per step."""
    from trl_ext.tiny import build_tiny_causal_lm, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    # head_dim 64: vLLM's attention kernels do not take the test model's 16
    build_tiny_causal_lm(tokenizer, hidden_size=256, intermediate_size=512).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    args = tiny_args(
        trl_ext.DAPOConfig, str(tmp_path / "out"), use_cpu=False, max_steps=4, use_vllm=True, vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3, vllm_enable_sleep_mode=sleep_mode, soft_overlong_punishment=False,
        vllm_importance_sampling_correction=False,
    )  # fmt: skip
    trainer = trl_ext.DAPOTrainer(
        model=str(tmp_path / "model"), reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(16, 4)
    )
    pushes = []
    sync = trainer.vllm_generation.sync_weights
    trainer.vllm_generation.sync_weights = lambda: (pushes.append(trainer.state.global_step), sync())[1]
    trainer.train()
    assert sum(_ds_logs(trainer, "dynamic_sampling/generated_groups")) > sum(
        _ds_logs(trainer, "dynamic_sampling/used_groups")
    )
    assert max(_ds_logs(trainer, "dynamic_sampling/rounds")) > 1 or not sleep_mode
    assert len(pushes) == len(set(pushes))  # at most one push per step


def test_tools_environments_and_rollout_func_are_refused_with_dynamic_sampling():
    """Replaying kept completions into TRL's step would run tools or environments a second time."""
    from types import SimpleNamespace

    from trl_ext.trainers.grpo import GRPOTrainer

    for name, attribute, value in (
        ("tools", "tools", [len]),
        ("environment_factory", "environment_factories", {None: object}),
        ("rollout_func", "rollout_func", print),
    ):
        trainer = SimpleNamespace(tools=None, environment_factories=None, rollout_func=None)
        setattr(trainer, attribute, value)
        with pytest.raises(ValueError, match=f"does not support {name}.*dynamic_sampling=False"):
            GRPOTrainer._refuse_unsupported_generation(trainer)
    GRPOTrainer._refuse_unsupported_generation(
        SimpleNamespace(tools=[], environment_factories=None, rollout_func=None)
    )
