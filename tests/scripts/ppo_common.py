"""Shared set-up for the PPO tests: a token-level reward, prompts and a tiny CPU config."""

from __future__ import annotations

from datasets import Dataset

from trl_ext.trainers.ppo import PPOConfig


def even_token_reward(completion_ids, **kwargs):
    """Fraction of even token ids: a deterministic function of the completion tokens (recomputable in tests)."""
    return [sum(1 for token in ids if token % 2 == 0) / max(len(ids), 1) for ids in completion_ids]


def prompts(n=16):
    return Dataset.from_dict({"prompt": [f"What is {i} + {i}?" for i in range(n)]})


def tiny_ppo_config(output_dir, **overrides) -> PPOConfig:
    settings = dict(
        output_dir=str(output_dir), per_device_train_batch_size=4, max_completion_length=6, learning_rate=5e-3,
        critic_learning_rate=1e-2, max_steps=2, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, gradient_checkpointing=False, seed=7, lr_scheduler_type="linear",
        disable_tqdm=True,
    )  # fmt: skip
    settings.update(overrides)
    return PPOConfig(**settings)
