"""Every private TRL touch of ``PPOTrainer``, in one place, each guarded by tests/trainers/test_trl_guards.py.

- ``_get_per_token_logps_and_entropies``: logπ_old of a rollout when TRL skipped it (the ratio is 1 by construction
  when steps_per_generation == gradient_accumulation_steps, but the KL penalty in the reward needs it);
- the ``beta`` toggle: TRL computes reference log-probs during generation, and loads a reference model (or keeps a
  PEFT "ref" adapter), only when ``beta != 0``, and adds β·k3 to the loss with the same attribute. PPO's KL lives in
  the reward: β is made non-zero while TRL builds the trainer and while it generates, and restored for the loss.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

# The TRL/transformers methods trainers/ppo.py wraps or calls, with the parameters it relies on.
PPO_TRL_HOOKS: dict[str, tuple[str, ...]] = {
    "_generate_and_score_completions": ("self", "inputs"),
    "_get_per_token_logps_and_entropies": (
        "self",
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
    ),
    "compute_loss": ("self", "model", "inputs", "return_outputs", "num_items_in_batch"),
    "training_step": ("self", "model", "inputs", "num_items_in_batch"),
    "create_scheduler": ("self", "num_training_steps", "optimizer"),
    "save_model": ("self", "output_dir", "_internal_call"),
    "_save_checkpoint": ("self", "model", "trial"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
}


class PPOHookMixin:
    """TRL's per-token log-probs and the ``beta`` toggle around generation; list it before ``GRPOTrainer``."""

    def policy_logps(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, length: int) -> torch.Tensor:
        """logπ_old of the completion tokens, as TRL computes it (it skips this when the ratio is 1 by construction,
        but the KL penalty in the reward needs it)."""
        batch_size = (
            self.args.per_device_train_batch_size if self.model.training else self.args.per_device_eval_batch_size
        )
        with torch.no_grad():
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model, input_ids, attention_mask, length, batch_size
            )
        return logps

    def restore_loss_beta(self) -> None:
        """After ``reference_model_kept``: TRL's ``beta`` (its KL-in-loss coefficient) back to the config's value; the
        reference model TRL built is kept either way."""
        self.beta = self.args.beta

    @contextlib.contextmanager
    def reference_logps_requested(self) -> Iterator[None]:
        """TRL computes reference log-probs during generation only when ``self.beta != 0`` and adds β·k3 to the loss
        with the same attribute. PPO's KL lives in the reward: β is non-zero while TRL generates, restored for the
        loss."""
        beta = self.beta
        if self._needs_reference and beta == 0.0:
            self.beta = 1.0
        try:
            yield
        finally:
            self.beta = beta


@contextlib.contextmanager
def reference_model_kept(args: Any, needed: bool) -> Iterator[None]:
    """TRL loads a reference model (or keeps a PEFT 'ref' adapter) only when ``args.beta != 0``; the KL penalty in the
    reward needs one even when the KL-in-loss β is 0, so β is non-zero while TRL builds the trainer."""
    beta = args.beta
    if needed and beta == 0.0:
        args.beta = 1.0
    try:
        yield
    finally:
        args.beta = beta
