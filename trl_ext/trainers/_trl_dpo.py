"""Every private TRL touch of trl_ext's ``DPOTrainer``, in one place, each guarded by tests/trainers/test_trl_guards.py:
the extra ``margin`` column (``SignatureColumnMixin``), the ``precompute_ref_logps`` flip that makes TRL read the
(margin-shifted) reference log-probs from the batch, and the margin's correction of TRL's logged ``_metrics``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trl_ext.trainers._trl_hooks import SignatureColumnMixin

# Everything of TRL's DPOTrainer trainers/dpo.py relies on, in one place. Methods: name -> leading
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


class DPOHookMixin(SignatureColumnMixin):
    """List it before ``trl.DPOTrainer`` in the bases."""

    extra_signature_column = "margin"

    def check_trl_dpo_attributes(self) -> None:
        """Call at the end of ``__init__``: the TRL attributes trl_ext reads exist."""
        missing = [name for name in DPO_ATTRIBUTES if not hasattr(self, name)]
        if missing:
            raise RuntimeError(f"trl_ext's DPOTrainer relies on TRL DPOTrainer attributes that are gone: {missing}.")

    @contextmanager
    def reference_logps_from_batch(self) -> Iterator[None]:
        """For one call, make TRL read the reference log-probs from the batch, as with precomputed ones."""
        saved = self.precompute_ref_logps
        self.precompute_ref_logps = True
        try:
            yield
        finally:
            self.precompute_ref_logps = saved

    def shift_logged_rewards(self, offset: float, logged_as: str = "margin") -> None:
        """Add ``offset`` to the last ``rewards/chosen`` and ``rewards/margins`` TRL logged, and log it as
        ``logged_as`` (TRL's metrics saw the margin-shifted reference)."""
        metrics: Any = self._metrics["train" if self.model.training else "eval"]
        for key in ("rewards/chosen", "rewards/margins"):
            metrics[key][-1] += offset
        metrics[logged_as].append(offset)
