"""ProRLTrainer: paper defaults, reset errors, and resets inside the real recipe (with dynamic sampling)."""

import pytest
import torch

import trl_ext
from tests._reset_trainers import length_reward, prompts

TINY = dict(
    per_device_train_batch_size=4, num_generations=4, max_completion_length=6, learning_rate=5e-3, logging_steps=1,
    save_strategy="no", report_to="none", use_cpu=True, bf16=False, gradient_checkpointing=False, seed=3,
    disable_tqdm=True,
)  # fmt: skip


def test_prorl_config_carries_the_paper_defaults(tmp_path):
    args = trl_ext.ProRLConfig(output_dir=str(tmp_path), **TINY)
    assert (args.beta, args.epsilon, args.epsilon_high, args.temperature) == (1e-4, 0.2, 0.4, 1.2)
    assert args.dynamic_sampling and args.loss_type == "dapo" and args.reset_optimizer


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"beta": 0.0, "ref_reset_steps": 2}, "need a reference"), ({"ref_reset_steps": 0}, "`ref_reset_steps`")],
)
def test_reset_configuration_errors(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        trl_ext.ProRLConfig(output_dir=str(tmp_path), **{**TINY, **overrides})


def test_prorl_resets_reference_and_optimizer_and_records_them_in_the_card(tmp_path, tiny_policy_path):
    args = trl_ext.ProRLConfig(output_dir=str(tmp_path), max_steps=3, ref_reset_steps=2, beta=0.5, **TINY)
    trainer = trl_ext.ProRLTrainer(
        model=tiny_policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts()
    )
    trainer.train()
    assert trainer.reset_bookkeeping.reset_steps == [2]
    policy, reference = trainer._reference_models()
    assert not all(torch.equal(a, b) for a, b in zip(policy.parameters(), reference.parameters(), strict=True))
    kl = [log["kl"] for log in trainer.state.log_history if "kl" in log]
    assert kl[1] > 0 and kl[2] == pytest.approx(0.0, abs=1e-7)  # step 3 is the first after the reset
    trainer.create_model_card()
    card = (tmp_path / "README.md").read_text()
    assert "**ProRL**" in card and "resets (ProRL) happened at optimizer steps: 2" in card


def test_manual_reset_from_user_code(tmp_path, tiny_policy_path):
    args = trl_ext.ProRLConfig(output_dir=str(tmp_path), max_steps=1, **TINY)
    trainer = trl_ext.ProRLTrainer(
        model=tiny_policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts()
    )
    trainer.train()
    trainer.reset_reference()
    policy, reference = trainer._reference_models()
    assert all(torch.equal(a, b) for a, b in zip(policy.parameters(), reference.parameters(), strict=True))
    assert trainer.reset_bookkeeping.reset_reasons == ["manual"]


def test_prorl_resume_after_a_reset_matches_the_uninterrupted_run(tmp_path, tiny_policy_path):
    def run(output_dir, resume=None, **overrides):
        args = trl_ext.ProRLConfig(output_dir=str(output_dir), max_steps=4, ref_reset_steps=2, beta=0.5,
                                   **{**TINY, **overrides})  # fmt: skip
        trainer = trl_ext.ProRLTrainer(model=tiny_policy_path, reward_funcs=length_reward, args=args,
                                       train_dataset=prompts())  # fmt: skip
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full", save_strategy="steps", save_steps=3)
    resumed = run(tmp_path / "resumed", resume=str(tmp_path / "full" / "checkpoint-3"))
    assert resumed.reset_bookkeeping.reset_steps == full.reset_bookkeeping.reset_steps == [2, 4]
    for a, b in zip(full._reference_models(), resumed._reference_models(), strict=True):
        for p, q in zip(a.parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(p, q, atol=1e-6, rtol=0)
    states = [[t for s in t.optimizer.state.values() for t in s.values()] for t in (full, resumed)]
    for p, q in zip(*states, strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)
