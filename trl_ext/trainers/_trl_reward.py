"""Every private TRL touch of trl_ext's ``RewardTrainer``, in one place, each guarded by
tests/trainers/test_trl_guards.py: the extra ``weight`` column (``SignatureColumnMixin``) and TRL's dataset
preparation ``_prepare_dataset``, which receives listwise data expanded into weighted pairs first.
"""

from __future__ import annotations

from typing import Any

from trl_ext.trainers._trl_hooks import SignatureColumnMixin

# Everything of TRL's RewardTrainer trainers/reward.py relies on, in one place: name -> leading parameters.
REWARD_HOOKS: dict[str, tuple[str, ...]] = {
    "compute_loss": ("self", "model", "inputs", "return_outputs", "num_items_in_batch"),
    "_prepare_dataset": ("self", "dataset", "processing_class", "args", "dataset_name"),
    "_set_signature_columns_if_needed": ("self",),
}


class RewardHookMixin(SignatureColumnMixin):
    """List it before ``trl.RewardTrainer`` in the bases; the trainer implements ``expand_dataset``."""

    extra_signature_column = "weight"

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        dataset = self.expand_dataset(dataset, args, dataset_name)
        return super()._prepare_dataset(dataset, processing_class, args, dataset_name)

    def expand_dataset(self, dataset: Any, args: Any, dataset_name: str) -> Any:
        """The dataset TRL prepares (tokenizes); by default the one given."""
        return dataset
