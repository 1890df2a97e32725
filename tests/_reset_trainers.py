"""Shared set-up for reference-reset trainer tests: tiny GRPO runs with resets on."""

from __future__ import annotations

from dataclasses import dataclass

import trl
from datasets import Dataset

from trl_ext.trainers.reference_resets import ReferenceResetArguments, ReferenceResetMixin


@dataclass
class ResetGRPOConfig(trl.GRPOConfig, ReferenceResetArguments):
    def __post_init__(self):
        super().__post_init__()
        self.validate_reference_resets()


class ResetGRPOTrainer(ReferenceResetMixin, trl.GRPOTrainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._init_reference_resets()


def prompts(n=16):
    return Dataset.from_dict({"prompt": [f"What is {i} + {i}?" for i in range(n)]})


def length_reward(completions, **kwargs):
    return [len(c) / 10 for c in completions]


def tiny_config(output_dir, **overrides):
    settings = dict(
        output_dir=str(output_dir), per_device_train_batch_size=4, num_generations=4, max_completion_length=6,
        learning_rate=5e-3, beta=0.5, max_steps=4, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, gradient_checkpointing=False, seed=7, lr_scheduler_type="linear",
        disable_tqdm=True,
    )
    settings.update(overrides)
    return ResetGRPOConfig(**settings)
