"""Reference resets inside real (tiny) GRPO training: exact copy, optimizer zeroed, schedule kept, resume exact."""

import shutil

import pytest
import torch
from transformers import TrainerCallback

from tests._reset_trainers import ResetGRPOTrainer, length_reward, prompts, tiny_config
from trl_ext.resets import REFERENCE_DIR


class Snapshot(TrainerCallback):
    """Records the state right after the reset at ``step`` (the reset callback runs before this one)."""

    def __init__(self, trainer, step):
        self.trainer, self.step, self.taken = trainer, step, None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step != self.step:
            return
        policy, reference = self.trainer._reference_models()
        self.taken = {
            "same": all(torch.equal(a, b) for a, b in zip(policy.parameters(), reference.parameters(), strict=True)),
            "state": [t.clone() for s in self.trainer.optimizer.state.values() for t in s.values()],
            "lr": self.trainer.optimizer.param_groups[0]["lr"],
            "resets": self.trainer.reset_bookkeeping.resets,
        }


def train(tmp_path, policy_path, **overrides):
    trainer = ResetGRPOTrainer(
        model=policy_path, reward_funcs=length_reward, args=tiny_config(tmp_path, **overrides), train_dataset=prompts()
    )
    return trainer


def logged(trainer, key):
    return [log[key] for log in trainer.state.log_history if key in log]


def test_interval_reset_copies_policy_zeroes_optimizer_and_keeps_schedule(tmp_path, tiny_policy_path):
    trainer = train(tmp_path, tiny_policy_path, ref_reset_steps=2)
    snapshot = Snapshot(trainer, step=2)
    trainer.add_callback(snapshot)
    trainer.train()
    taken = snapshot.taken
    assert taken["resets"] == 1 and taken["same"]
    assert taken["state"] and all(torch.count_nonzero(t) == 0 for t in taken["state"])
    assert taken["lr"] == pytest.approx(5e-3 * (1 - 2 / 4))  # linear schedule continues through the reset
    kl = logged(trainer, "kl")
    assert kl[1] > 0 and kl[2] == pytest.approx(0.0, abs=1e-7)  # step 3 is the first after the reset
    assert logged(trainer, "ref_reset/resets") == [0, 1, 1, 2]
    assert logged(trainer, "ref_reset/steps_since_reset") == [1, 0, 1, 0]
    assert trainer.reset_bookkeeping.reset_steps == [2, 4]


def test_resume_after_a_reset_reproduces_the_uninterrupted_run(tmp_path, tiny_policy_path):
    full = train(tmp_path / "full", tiny_policy_path, ref_reset_steps=2, save_strategy="steps", save_steps=3)
    full.train()
    resumed = train(tmp_path / "resumed", tiny_policy_path, ref_reset_steps=2)
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-3"))
    assert resumed.reset_bookkeeping.reset_steps == full.reset_bookkeeping.reset_steps == [2, 4]
    for trainer_pair in [(full, resumed)]:
        (policy_a, ref_a), (policy_b, ref_b) = (t._reference_models() for t in trainer_pair)
        for a, b in zip(policy_a.parameters(), policy_b.parameters(), strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
        for a, b in zip(ref_a.parameters(), ref_b.parameters(), strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    state_a = [t for s in full.optimizer.state.values() for t in s.values()]
    state_b = [t for s in resumed.optimizer.state.values() for t in s.values()]
    assert len(state_a) == len(state_b) > 0
    for a, b in zip(state_a, state_b, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_resume_without_the_saved_reference_would_differ(tmp_path, tiny_policy_path):
    """The resume test above can fail: TRL alone rebuilds the reference from the base weights."""
    full = train(tmp_path / "full", tiny_policy_path, ref_reset_steps=2, save_strategy="steps", save_steps=3)
    full.train()
    shutil.rmtree(tmp_path / "full" / "checkpoint-3" / REFERENCE_DIR)
    resumed = train(tmp_path / "resumed", tiny_policy_path, ref_reset_steps=100)
    resumed.train(resume_from_checkpoint=str(tmp_path / "full" / "checkpoint-3"))
    _, ref_full = full._reference_models()
    _, ref_resumed = resumed._reference_models()
    assert not all(torch.equal(a, b) for a, b in zip(ref_full.parameters(), ref_resumed.parameters(), strict=True))


def test_kl_trigger_fires_above_the_threshold_only(tmp_path, tiny_policy_path):
    firing = train(tmp_path / "a", tiny_policy_path, ref_reset_kl_threshold=1e-9, max_steps=3)
    firing.train()
    assert firing.reset_bookkeeping.resets >= 1
    assert firing.reset_bookkeeping.reset_reasons[0].startswith("kl")
    quiet = train(tmp_path / "b", tiny_policy_path, ref_reset_kl_threshold=1e6, max_steps=3)
    quiet.train()
    assert quiet.reset_bookkeeping.resets == 0


def step_reward(completions, trainer_state=None, **kwargs):
    return [float(trainer_state.global_step) + (i % 2) for i in range(len(completions))]


def constant_reward(completions, **kwargs):
    return [1.0 + (i % 2) for i in range(len(completions))]


@pytest.mark.parametrize(("reward", "expected_resets"), [(constant_reward, 2), (step_reward, 0)])
def test_plateau_trigger(tmp_path, tiny_policy_path, reward, expected_resets):
    args = tiny_config(
        tmp_path,
        ref_reset_metric="reward",
        ref_reset_patience=1,
        eval_strategy="steps",
        eval_steps=1,
        max_steps=3,
        per_device_eval_batch_size=4,
    )
    trainer = ResetGRPOTrainer(
        model=tiny_policy_path, reward_funcs=reward, args=args, train_dataset=prompts(), eval_dataset=prompts(4)
    )
    trainer.train()
    # constant: evaluation 1 sets the best, evaluations 2 and 3 do not improve it
    assert trainer.reset_bookkeeping.resets == expected_resets


def test_unknown_metric_is_named_at_the_first_evaluation(tmp_path, tiny_policy_path):
    args = tiny_config(
        tmp_path,
        ref_reset_metric="accuracy",
        eval_strategy="steps",
        eval_steps=1,
        max_steps=1,
        per_device_eval_batch_size=4,
    )
    trainer = ResetGRPOTrainer(
        model=tiny_policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts(), eval_dataset=prompts(4)
    )
    with pytest.raises(ValueError, match="`ref_reset_metric`='accuracy'.*eval_reward"):
        trainer.train()


def test_plateau_trigger_without_evaluation_is_a_config_error(tmp_path):
    with pytest.raises(ValueError, match="`ref_reset_metric`='reward'.*`eval_strategy` is 'no'"):
        tiny_config(tmp_path, ref_reset_metric="reward")


def test_plateau_trigger_without_eval_dataset_fails_before_training(tmp_path, tiny_policy_path):
    args = tiny_config(tmp_path, ref_reset_metric="reward", eval_strategy="steps", eval_steps=1)
    with pytest.raises(ValueError, match="didn't pass an `eval_dataset`"):  # transformers' own check
        ResetGRPOTrainer(model=tiny_policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts())


def test_peft_reset_copies_the_policy_adapter_into_the_ref_adapter(tmp_path, tiny_policy_path):
    from peft import LoraConfig

    from trl_ext.resets import adapter_pairs

    trainer = ResetGRPOTrainer(
        model=tiny_policy_path,
        reward_funcs=length_reward,
        train_dataset=prompts(),
        args=tiny_config(tmp_path, ref_reset_steps=2, max_steps=2, learning_rate=5e-2),
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]),
    )
    trainer.train()
    policy, _ = trainer._reference_models()
    pairs = list(adapter_pairs(policy))
    assert pairs and all(torch.equal(a, b) for a, b in pairs)
    assert any(a.abs().sum() > 0 for a, _ in pairs if a.shape[0] != 4)  # lora_B moved away from zero
    assert all(torch.count_nonzero(t) == 0 for s in trainer.optimizer.state.values() for t in s.values())


@pytest.mark.parametrize(
    ("overrides", "field"),
    [({"ref_reset_steps": 0}, "ref_reset_steps"), ({"ref_reset_patience": 0}, "ref_reset_patience")],
)
def test_config_errors_name_the_field(tmp_path, overrides, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        tiny_config(tmp_path, **overrides)
