"""``ReferenceResetMixin``: ``reset_reference()``, its triggers, its metrics and its checkpointing, for a trainer
with a reference model. List it before ``trainers._trl_checkpoint.CheckpointHooksMixin`` (which calls its
``save_checkpoint_state`` / ``load_checkpoint_state`` from TRL's checkpoint hooks) and the TRL base class.
"""

from __future__ import annotations

from trl_ext.resets.triggers import ReferenceResetCallback, ResetBookkeeping
from trl_ext.resets.weights import copy_policy_to_reference, load_reference, reset_optimizer_state, save_reference


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

    def save_checkpoint_state(self, directory: str) -> None:
        """Write the reference (once reset) and the triggers' bookkeeping into the checkpoint folder ``directory``."""
        super().save_checkpoint_state(directory)
        if not self._resets_enabled:
            return
        if self.reset_bookkeeping.resets:  # before the first reset the reference is the base model TRL rebuilds
            policy, ref_model = self._reference_models()
            save_reference(directory, policy, ref_model, write=self.args.should_save)
        if self.args.should_save:
            self.reset_bookkeeping.save(directory)

    def load_checkpoint_state(self, checkpoint: str) -> None:
        """Restore the reference and the bookkeeping from a checkpoint (TRL rebuilds the reference from the base)."""
        super().load_checkpoint_state(checkpoint)
        if not self._resets_enabled:
            return
        saved = ResetBookkeeping.load(checkpoint)
        if saved is not None:
            self.reset_bookkeeping = saved
        load_reference(checkpoint, *self._reference_models())
