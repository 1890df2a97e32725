"""The only place in trl_ext that touches TRL's private methods (DESIGN §4).

trl_ext wraps TRL and never copies it: a trainer overrides one of the hooks below, calls ``super()`` and
post-processes the result. These hooks have kept their signatures since TRL 0.29.1; ``check_trl_hooks``
verifies that the installed TRL still has them, and the trainers call ``require_trl_hooks`` at import time
so that a TRL upgrade that changes one fails loudly instead of drifting silently.
"""

from __future__ import annotations

import inspect
import os

import torch
from transformers import TrainerCallback

# hook name -> the parameter names trl_ext relies on, in order (``self`` first).
GRPO_HOOKS: dict[str, tuple[str, ...]] = {
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_generate_and_score_completions": ("self", "inputs"),
    "_prepare_inputs": ("self", "generation_batch"),
    "compute_loss": ("self", "model", "inputs", "return_outputs", "num_items_in_batch"),
    "training_step": ("self", "model", "inputs", "num_items_in_batch"),
    "_save_checkpoint": ("self", "model", "trial"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
}

# The TRL/transformers methods trainers/ppo.py wraps or calls, with the parameters it relies on (DESIGN §4). The two
# private calls are ``_get_per_token_logps_and_entropies`` (logπ_old when TRL skipped it) and ``_get_output_dir``.
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
    "_get_output_dir": ("self", "trial"),
    "compute_loss": ("self", "model", "inputs", "return_outputs", "num_items_in_batch"),
    "training_step": ("self", "model", "inputs", "num_items_in_batch"),
    "create_scheduler": ("self", "num_training_steps", "optimizer"),
    "save_model": ("self", "output_dir", "_internal_call"),
    "_save_checkpoint": ("self", "model", "trial"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
}

# Everything of TRL's DPOTrainer trainers/dpo.py relies on, in one place (DESIGN §4). Methods: name -> leading
# parameters, checked at import. Attributes: read (and, for the first, set for one call), checked at init.
DPO_HOOKS: dict[str, tuple[str, ...]] = {
    "compute_loss": ("self", "model", "inputs", "return_outputs", "num_items_in_batch"),
    "compute_ref_log_probs": ("self", "model", "inputs"),
    "_set_signature_columns_if_needed": ("self",),
    # wrapped by ReferenceResetMixin
    "_save_checkpoint": ("self", "model", "trial"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
    "log": ("self", "logs", "start_time"),
}
DPO_ATTRIBUTES = ("precompute_ref_logps", "ref_model", "beta", "loss_types", "f_divergence_type", "_metrics")

# Everything of TRL's RewardTrainer trainers/reward.py relies on, in one place (DESIGN §4): name -> leading parameters.
REWARD_HOOKS: dict[str, tuple[str, ...]] = {
    "compute_loss": ("self", "model", "inputs", "return_outputs", "num_items_in_batch"),
    "_prepare_dataset": ("self", "dataset", "processing_class", "args", "dataset_name"),
    "_set_signature_columns_if_needed": ("self",),
}

# transformers.Trainer's checkpoint upload, which ``CompleteCheckpointPushMixin`` holds back until the checkpoint is
# complete: it is called from inside ``Trainer._save_checkpoint``, before trl_ext's own checkpoint files exist.
TRAINER_PUSH_HOOKS: dict[str, tuple[str, ...]] = {"_push_from_checkpoint": ("self", "checkpoint_folder")}

# Keys that the output of ``_generate_and_score_completions`` always carries and that trl_ext reads or rewrites.
GENERATION_OUTPUT_KEYS = (
    "prompt_ids",
    "prompt_mask",
    "completion_ids",
    "completion_mask",
    "advantages",
    "num_items_in_batch",
)


def checkpoint_dir(trainer) -> str:
    """The folder ``Trainer._save_checkpoint`` writes for the current step (no hyper-parameter search trials)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    return os.path.join(trainer.args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}")


def check_trl_hooks(trainer_cls: type | None = None, hooks: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Return one message per hook whose signature no longer starts with the expected parameters."""
    if trainer_cls is None:
        from trl import GRPOTrainer as trainer_cls
    problems = []
    for name, expected in (hooks or GRPO_HOOKS).items():
        method = getattr(trainer_cls, name, None)
        if method is None:
            problems.append(f"{trainer_cls.__name__}.{name} no longer exists")
            continue
        params = tuple(inspect.signature(method).parameters)
        if params[: len(expected)] != expected:
            problems.append(f"{trainer_cls.__name__}.{name}{params} no longer starts with {expected}")
    return problems


def require_trl_hooks(trainer_cls: type | None = None, hooks: dict[str, tuple[str, ...]] | None = None) -> None:
    """Raise a RuntimeError listing every TRL hook trl_ext wraps whose signature changed."""
    problems = check_trl_hooks(trainer_cls, hooks)
    if problems:
        import trl

        raise RuntimeError(
            f"trl_ext does not support the installed TRL {trl.__version__}: "
            + "; ".join(problems)
            + ". Install the TRL range trl_ext declares (pip install 'trl>=1.16,<1.17')."
        )


class GRPOHookMixin:
    """Routes the private hooks of ``trl.GRPOTrainer`` to trl_ext; list it before ``trl.GRPOTrainer`` in the bases.

    Contract relied on (TRL 1.16, stable since 0.29.1): ``_generate_and_score_completions(inputs)`` generates, scores
    and returns this process's rows, calling ``_calculate_rewards`` exactly once; ``_calculate_rewards`` returns the
    GATHERED (P·B, F) reward tensor (identical on every rank, rows in rank order, groups contiguous). Both calls
    contain collectives, so every rank must make them the same number of times. Two private attributes are read:
    ``_metrics[mode]`` (name -> list of floats, averaged by ``log``) and ``_logs["advantages"]`` (a deque of the
    gathered advantages of the last batch, shown in the completions table); tests exercise both.
    """

    _trl_ext_rewards_per_func = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._trl_ext_rewards_per_func = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        return self.generate_and_score(inputs)

    def generate_and_score(self, inputs: list[dict]) -> dict:
        """What TRL's ``_generate_and_score_completions`` returns; trainers override this, not the private hook."""
        return self.trl_generate_round(inputs)[0]

    def trl_generate_round(self, inputs: list[dict]) -> tuple[dict, torch.Tensor]:
        """One call of TRL's generation and scoring: (its output for this rank, the gathered (P·B, F) rewards)."""
        self._trl_ext_rewards_per_func = None
        output = super()._generate_and_score_completions(inputs)
        rewards_per_func, self._trl_ext_rewards_per_func = self._trl_ext_rewards_per_func, None
        missing = [key for key in GENERATION_OUTPUT_KEYS if key not in output]
        if rewards_per_func is None or missing:
            raise RuntimeError(
                "TRL's _generate_and_score_completions no longer behaves as trl_ext expects "
                f"(_calculate_rewards called: {rewards_per_func is not None}; missing output keys: {missing})."
            )
        return output, rewards_per_func

    def replace_logged_advantages(self, advantages: torch.Tensor) -> None:
        """Show trl_ext's advantages in TRL's completions table: TRL logged its own for the same gathered rows."""
        logged = self._logs["advantages"]
        for _ in range(min(advantages.numel(), len(logged))):
            logged.pop()
        logged.extend(advantages.tolist())

    def record_metric(self, name: str, value: float) -> None:
        """Log a scalar with TRL's own metrics of this step (averaged over the logging window, like ``reward``)."""
        mode = "train" if self.model.training else "eval"
        self._metrics[mode][name].append(float(value))


class CompleteCheckpointPushMixin:
    """Uploads a checkpoint (``push_to_hub=True``, any ``hub_strategy`` but "end") only once it is complete.

    ``Trainer._save_checkpoint`` starts the upload itself, before the subclasses that wrap it (reference resets,
    dynamic sampling, the PPO critic) have written their files into the checkpoint; a resume from the Hub would then
    silently miss them. The upload is recorded instead and started from the ``on_save`` event, which Trainer fires
    right after the whole ``_save_checkpoint`` chain returned, once every process has finished writing.
    """

    _trl_ext_pending_push: str | None = None

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        self._trl_ext_pending_push = checkpoint_folder
        if not any(isinstance(cb, _PushCompleteCheckpoint) for cb in self.callback_handler.callbacks):
            self.add_callback(_PushCompleteCheckpoint(self))

    def push_complete_checkpoint(self) -> None:
        """Start the held-back upload (every process calls it: it waits for all of them to finish writing)."""
        folder, self._trl_ext_pending_push = self._trl_ext_pending_push, None
        if folder is None:
            return
        self.accelerator.wait_for_everyone()
        super()._push_from_checkpoint(folder)


class _PushCompleteCheckpoint(TrainerCallback):
    """The ``on_save`` callback of ``CompleteCheckpointPushMixin``."""

    def __init__(self, trainer: CompleteCheckpointPushMixin):
        self.trainer = trainer

    def on_save(self, args, state, control, **kwargs):
        self.trainer.push_complete_checkpoint()
