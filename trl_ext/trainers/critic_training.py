"""The critic's training in ``PPOTrainer``: building and wrapping it, its own optimizer and scheduler (stepped when
the policy's optimizer steps), and saving it with the model and in every checkpoint (so resuming is exact)."""

from __future__ import annotations

import json
import os

import torch
from accelerate.utils import is_peft_model
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from transformers import AutoModelForSequenceClassification, PreTrainedModel, ProcessorMixin, get_scheduler
from trl.trainer.utils import disable_dropout_in_model

from trl_ext.trainers.critic import TokenValueModel, load_value_model

CRITIC_DIR = "critic"
CRITIC_OPTIMIZER_NAME = "critic_optimizer.pt"
CRITIC_SCHEDULER_NAME = "critic_scheduler.pt"
PPO_STATE_NAME = "ppo_state.json"


class CriticTrainingMixin:
    """The critic of ``PPOTrainer`` (``self.critic``), with its optimizer, scheduler and checkpoint state."""

    def _build_critic(self, value_model: str | PreTrainedModel | None) -> PreTrainedModel:
        if isinstance(self.processing_class, ProcessorMixin):
            raise NotImplementedError("PPOTrainer supports text-only policies; the critic reads token ids only.")
        source = value_model if value_model is not None else self.args.value_model_name_or_path
        kwargs = {"dtype": self.model.dtype} if isinstance(source, str) or is_peft_model(self.model) else {}
        critic = load_value_model(source, self.model, self.processing_class, **kwargs)
        if self.args.disable_dropout:
            disable_dropout_in_model(critic)
        if self.args.gradient_checkpointing:
            critic.gradient_checkpointing_enable(gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs)
        return critic

    def _prepare_critic(self, critic: TokenValueModel) -> nn.Module:
        """DDP through accelerate; under DeepSpeed (which engines the policy only) a plain DDP wrapper, so the critic's
        gradients are all-reduced either way."""
        if not self.is_deepspeed_enabled:
            return self.accelerator.prepare_model(critic)
        critic = critic.to(self.accelerator.device)
        if self.accelerator.num_processes == 1:
            return critic
        device_ids = [self.accelerator.local_process_index] if self.accelerator.device.type == "cuda" else None
        return DistributedDataParallel(critic, device_ids=device_ids)

    @property
    def value_model(self) -> PreTrainedModel:
        """The critic, unwrapped (a ``*ForSequenceClassification`` model)."""
        return self.accelerator.unwrap_model(self.critic).critic

    def _critic_optimizer_step(self) -> None:
        if self.args.max_grad_norm and self.args.max_grad_norm > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.args.max_grad_norm)
            self.record_metric("ppo/critic_grad_norm", grad_norm.item())
        self.critic_optimizer.step()
        if not isinstance(self.critic_lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):  # needs metrics
            self.critic_lr_scheduler.step()
        self.critic_optimizer.zero_grad(set_to_none=True)

    def create_scheduler(
        self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None
    ) -> torch.optim.lr_scheduler.LRScheduler:
        """The policy's scheduler (Trainer), and the critic's optimizer and scheduler (same schedule and warm-up)."""
        creating = self.lr_scheduler is None
        scheduler = super().create_scheduler(num_training_steps, optimizer)
        if self.critic_optimizer is None:
            optimizer = self._new_critic_optimizer()
            # accelerate would hand a second optimizer to DeepSpeed's engine; the critic's stays a torch optimizer there
            self.critic_optimizer = (
                optimizer if self.is_deepspeed_enabled else self.accelerator.prepare_optimizer(optimizer)
            )
        if creating or self.critic_lr_scheduler is None:
            self.critic_lr_scheduler = get_scheduler(
                self.args.lr_scheduler_type,
                optimizer=self.critic_optimizer,
                num_warmup_steps=self.args.get_warmup_steps(num_training_steps),
                num_training_steps=num_training_steps,
                scheduler_specific_kwargs=self.args.lr_scheduler_kwargs,
            )
        return scheduler

    def _new_critic_optimizer(self) -> torch.optim.Optimizer:
        args = self.args
        return torch.optim.AdamW(
            [p for p in self.critic.parameters() if p.requires_grad],
            lr=args.critic_learning_rate or args.learning_rate,
            betas=(args.adam_beta1, args.adam_beta2),
            eps=args.adam_epsilon,
            weight_decay=args.weight_decay,
        )

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Save the policy (Trainer) and the critic in ``<output_dir>/critic`` (before any push, so it is included)."""
        self.save_value_model(os.path.join(output_dir or self.args.output_dir, CRITIC_DIR))
        super().save_model(output_dir, _internal_call)

    def save_value_model(self, directory: str) -> None:
        """Save the critic and the tokenizer, loadable with ``AutoModelForSequenceClassification.from_pretrained``."""
        if self.args.should_save:
            self.value_model.save_pretrained(directory)
            self.processing_class.save_pretrained(directory)

    def save_checkpoint_state(self, folder: str) -> None:
        super().save_checkpoint_state(folder)  # TRL's save_model call already wrote <checkpoint>/critic
        if not self.args.should_save:
            return
        with open(os.path.join(folder, PPO_STATE_NAME), "w") as handle:
            json.dump({"kl_coef": self.kl_coef}, handle)
        if not self.args.save_only_model and self.critic_optimizer is not None:
            torch.save(self.critic_optimizer.state_dict(), os.path.join(folder, CRITIC_OPTIMIZER_NAME))
            torch.save(self.critic_lr_scheduler.state_dict(), os.path.join(folder, CRITIC_SCHEDULER_NAME))

    def load_checkpoint_state(self, checkpoint: str) -> None:
        super().load_checkpoint_state(checkpoint)
        critic_dir = os.path.join(checkpoint, CRITIC_DIR)
        if not os.path.isdir(critic_dir):
            raise FileNotFoundError(f"{checkpoint} has no {CRITIC_DIR}/ folder: it was not written by PPOTrainer.")
        saved = AutoModelForSequenceClassification.from_pretrained(critic_dir, dtype=self.value_model.dtype)
        self.value_model.load_state_dict(saved.state_dict())
        state_path = os.path.join(checkpoint, PPO_STATE_NAME)
        if os.path.isfile(state_path):
            with open(state_path) as handle:
                self.kl_coef = json.load(handle)["kl_coef"]
        optimizer_path = os.path.join(checkpoint, CRITIC_OPTIMIZER_NAME)
        if os.path.isfile(optimizer_path):
            self.critic_optimizer.load_state_dict(torch.load(optimizer_path, map_location="cpu", weights_only=True))
            scheduler_state = torch.load(os.path.join(checkpoint, CRITIC_SCHEDULER_NAME), weights_only=True)
            self.critic_lr_scheduler.load_state_dict(scheduler_state)
