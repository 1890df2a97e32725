"""Reference resets for any trl_ext trainer with a reference model (ProRL, arXiv 2505.24864 §2.3.1).

``ReferenceResetArguments`` is mixed into a trainer's Config; ``ReferenceResetMixin`` into the Trainer, before
the TRL base class. The mixin wraps only stable Trainer hooks (``_save_checkpoint``,
``_load_optimizer_and_scheduler``; both guarded in ``_trl_hooks``) plus the public ``log``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl_ext.callbacks import ReferenceResetCallback, ResetBookkeeping
from trl_ext.resets import copy_policy_to_reference, load_reference, reset_optimizer_state, save_reference
from trl_ext.trainers._trl_hooks import checkpoint_dir


@dataclass
class ReferenceResetArguments:
    """Reference-reset knobs shared by every trl_ext trainer that has a reference model."""

    ref_reset_steps: int | None = field(
        default=None,
        metadata={"help": "Hard-reset the reference to the policy every this many optimizer steps. None: never."},
    )
    ref_reset_metric: str | None = field(
        default=None,
        metadata={
            "help": "Eval metric watched for a plateau (e.g. 'reward'; the 'eval_' prefix is optional). The "
            "reference is reset when it has not improved for `ref_reset_patience` evaluations. None: off."
        },
    )
    ref_reset_metric_mode: str = field(
        default="max", metadata={"help": "'max' if a larger `ref_reset_metric` is better, 'min' otherwise."}
    )
    ref_reset_patience: int = field(
        default=1, metadata={"help": "Evaluations without improvement before a plateau reset."}
    )
    ref_reset_min_delta: float = field(
        default=0.0, metadata={"help": "The smallest change of `ref_reset_metric` that counts as an improvement."}
    )
    ref_reset_kl_threshold: float | None = field(
        default=None,
        metadata={"help": "Reset when the mean KL to the reference over a logging window exceeds this. None: off."},
    )
    reset_optimizer: bool = field(
        default=True,
        metadata={
            "help": "Re-initialise the optimizer state in place at each reset (ProRL); the LR schedule goes on."
        },
    )

    @property
    def reference_resets_enabled(self) -> bool:
        return any(
            value is not None for value in (self.ref_reset_steps, self.ref_reset_metric, self.ref_reset_kl_threshold)
        )

    def validate_reference_resets(self) -> None:
        if self.ref_reset_steps is not None and self.ref_reset_steps <= 0:
            raise ValueError(
                f"`ref_reset_steps` must be a positive number of steps or None, got {self.ref_reset_steps}."
            )
        if self.ref_reset_metric_mode not in ("max", "min"):
            raise ValueError(f"`ref_reset_metric_mode` must be 'max' or 'min', got {self.ref_reset_metric_mode!r}.")
        if self.ref_reset_patience < 1:
            raise ValueError(f"`ref_reset_patience` must be >= 1, got {self.ref_reset_patience}.")
        if self.ref_reset_kl_threshold is not None and self.ref_reset_kl_threshold <= 0:
            raise ValueError(f"`ref_reset_kl_threshold` must be > 0 or None, got {self.ref_reset_kl_threshold}.")
        if self.ref_reset_metric is not None and getattr(self, "eval_strategy", "no") == "no":
            raise ValueError(
                f"`ref_reset_metric`={self.ref_reset_metric!r} resets the reference on a plateau of an evaluation "
                "metric, but `eval_strategy` is 'no': nothing is ever evaluated, so it could never fire. Set "
                "`eval_strategy` ('steps' with `eval_steps`, or 'epoch') and pass an eval dataset, or use "
                "`ref_reset_steps` / `ref_reset_kl_threshold` instead."
            )


class ReferenceResetMixin:
    """Adds ``reset_reference()``, its triggers, its metrics and its checkpointing to a TRL trainer.

    A plain TRL config (without ``ReferenceResetArguments``) means resets off, except the explicit
    ``reset_reference()`` call.
    """

    @property
    def _resets_enabled(self) -> bool:
        return getattr(self.args, "reference_resets_enabled", False)

    def _init_reference_resets(self) -> None:
        """Call at the end of ``__init__``, once ``self.ref_model`` exists."""
        self.reset_bookkeeping = ResetBookkeeping()
        if self._resets_enabled:
            self.add_callback(ReferenceResetCallback(self))

    def _reference_models(self):
        unwrap = self.accelerator.unwrap_model
        ref_model = getattr(self, "ref_model", None)
        return unwrap(self.model), (unwrap(ref_model) if ref_model is not None else None)

    def reset_reference(self, reason: str = "manual") -> None:
        """Copy the policy into the reference exactly and, with `reset_optimizer`, zero the optimizer state."""
        copy_policy_to_reference(*self._reference_models())
        if getattr(self.args, "reset_optimizer", True) and self.optimizer is not None:
            reset_optimizer_state(self.optimizer)
        self.reset_bookkeeping.record(self.state.global_step, reason)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self._resets_enabled and "loss" in logs:  # training-step logs only
            logs["ref_reset/resets"] = self.reset_bookkeeping.resets
            logs["ref_reset/steps_since_reset"] = self.state.global_step - self.reset_bookkeeping.last_reset_step
        super().log(logs, start_time)

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if not self._resets_enabled:
            return
        directory = checkpoint_dir(self)
        if self.reset_bookkeeping.resets:  # before the first reset the reference is the base model TRL rebuilds
            policy, ref_model = self._reference_models()
            save_reference(directory, policy, ref_model, write=self.args.should_save)
        if self.args.should_save:
            self.reset_bookkeeping.save(directory)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None or not self._resets_enabled:
            return
        saved = ResetBookkeeping.load(checkpoint)
        if saved is not None:
            self.reset_bookkeeping = saved
        load_reference(checkpoint, *self._reference_models())
