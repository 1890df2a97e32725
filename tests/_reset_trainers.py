"""Shared set-up for reference-reset trainer tests: tiny GRPO runs with resets on."""

from __future__ import annotations

from datasets import Dataset

# The real trainer: reference resets are part of every trl_ext GRPO-family trainer.
from trl_ext.trainers.grpo import GRPOConfig as ResetGRPOConfig
from trl_ext.trainers.grpo import GRPOTrainer as ResetGRPOTrainer

__all__ = ["ResetGRPOConfig", "ResetGRPOTrainer", "length_reward", "prompts", "tiny_config"]


def prompts(n=16):
    return Dataset.from_dict({"prompt": [f"What is {i} + {i}?" for i in range(n)]})


def length_reward(completions, **kwargs):
    return [len(c) / 10 for c in completions]


def tiny_config(output_dir, **overrides):
    settings = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        learning_rate=5e-3,
        beta=0.5,
        max_steps=4,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=7,
        lr_scheduler_type="linear",
        disable_tqdm=True,
    )
    settings.update(overrides)
    return ResetGRPOConfig(**settings)
