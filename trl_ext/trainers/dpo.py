"""DPO with per-pair margins, for preference pairs mined from verifiable rewards (``trl_ext.data``).

A ``margin`` column m makes the DPO logit β·Δ − m instead of β·Δ (``trl_ext.core.preference.dpo_margin_loss``).
TRL computes β·Δ inside ``_compute_loss``; rather than copy it, the margin reaches it through the reference
log-probs: adding m/β to the chosen completion's reference log-prob lowers Δ by exactly m/β. So the trainer
computes the reference log-probs with TRL's public ``compute_ref_log_probs`` (the forward TRL would have run
anyway), shifts them, and lets TRL read them from the batch as it does with ``precompute_ref_log_probs=True``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from trl import DPOConfig as TRLDPOConfig
from trl import DPOTrainer as TRLDPOTrainer

from trl_ext.core.preference import MARGIN_LOSS_TYPES, margin_as_logratio_offset
from trl_ext.data.collators import FloatColumnCollator
from trl_ext.hub import ModelCardMixin
from trl_ext.models import resolve_model
from trl_ext.resets import ReferenceResetArguments, ReferenceResetMixin
from trl_ext.trainers._trl_card import RecipeTagsMixin
from trl_ext.trainers._trl_checkpoint import CheckpointHooksMixin
from trl_ext.trainers._trl_dpo import DPO_ATTRIBUTES, DPO_HOOKS, DPOHookMixin  # noqa: F401  (DPO_ATTRIBUTES: old home)
from trl_ext.trainers._trl_hooks import CompleteCheckpointPushMixin, require_trl_hooks
from trl_ext.trainers.configs import resolve_config
from trl_ext.trainers.papers import RecipeCard, paper

# A margin needs a loss of β·Δ alone; "sft" ignores the reference, so the shift does not touch it.
MARGIN_COMPATIBLE_LOSS_TYPES = (*MARGIN_LOSS_TYPES, "sft")
MARGIN_COLUMN = "margin"

require_trl_hooks(TRLDPOTrainer, DPO_HOOKS)


@dataclass
class DPOConfig(ReferenceResetArguments, TRLDPOConfig):
    r"""Configuration for [`DPOTrainer`]: TRL's DPOConfig plus ProRL reference resets (DPO, arXiv 2305.18290).

    ``ref_reset_steps`` / ``ref_reset_metric`` / ``ref_reset_kl_threshold`` hard-copy the policy into the
    reference and, with ``reset_optimizer``, re-initialise the optimizer state in place (ProRL, arXiv 2505.24864
    §2.3.1); with pairs re-mined from the current policy between runs this is iterative (online) DPO.

    A dataset with a ``margin`` column trains on −log σ(β·Δ − margin) (``loss_type="sigmoid"``; ODPO, arXiv
    2402.10571), max(0, 1 − (β·Δ − margin)) (``"hinge"``) or robust DPO's loss at β·Δ − margin (``"robust"``).
    A margin is undefined for the other loss types and for ``f_divergence_type`` other than ``"reverse_kl"``.
    """

    def __post_init__(self):
        super().__post_init__()
        self.validate_reference_resets()
        if self.reference_resets_enabled and self.precompute_ref_log_probs:
            raise ValueError(
                "Reference resets need `precompute_ref_log_probs=False`: precomputed reference log-probs would go "
                "stale at the first reset."
            )


class DPOTrainer(
    ModelCardMixin,
    CompleteCheckpointPushMixin,
    ReferenceResetMixin,
    CheckpointHooksMixin,
    DPOHookMixin,
    RecipeTagsMixin,
    TRLDPOTrainer,
):
    """TRL's DPOTrainer plus an optional per-pair ``margin`` column (see the module docstring) and ProRL reference
    resets (see [`DPOConfig`]). A plain ``trl.DPOConfig`` works too, with resets off.

    With a margin, the logged ``rewards/chosen`` and ``rewards/margins`` are the margin-free values (β·logratio),
    ``margin`` is the mean margin, and ``rewards/accuracies`` counts the pairs with β·Δ > margin.
    """

    config_class = DPOConfig
    recipe_card = RecipeCard(
        name="DPO",
        tags=("trl", "trl-ext", "dpo"),
        paper=paper(
            "Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
            "2305.18290",
            "rafailov2023direct",
            "Rafael Rafailov and Archit Sharma and Eric Mitchell and Christopher D. Manning and "
            "Stefano Ermon and Chelsea Finn",
            2023,
            entry="inproceedings",
            booktitle="Advances in Neural Information Processing Systems 36 (NeurIPS 2023)",
        ),
    )

    def __init__(
        self,
        model: str | torch.nn.Module,
        ref_model: torch.nn.Module | None = None,
        args: TRLDPOConfig | None = None,
        *more,
        **kwargs,
    ):
        args = resolve_config(type(self), model, args)  # a plain trl.DPOConfig: resets off
        model = resolve_model(model, args, kwargs)  # an adapter repo/dir: its base + the adapter, trainable
        super().__init__(model, ref_model, args, *more, **kwargs)
        self.check_trl_dpo_attributes()
        self.data_collator = FloatColumnCollator(self.data_collator, MARGIN_COLUMN)
        if any(MARGIN_COLUMN in _column_names(dataset) for dataset in self._datasets()):
            self._check_margin_supported()
        self._init_reference_resets()

    def _datasets(self) -> list:
        evals = self.eval_dataset.values() if isinstance(self.eval_dataset, dict) else [self.eval_dataset]
        return [dataset for dataset in [self.train_dataset, *evals] if dataset is not None]

    def _check_margin_supported(self) -> None:
        unsupported = [loss_type for loss_type in self.loss_types if loss_type not in MARGIN_COMPATIBLE_LOSS_TYPES]
        if unsupported:
            raise ValueError(
                f"A `margin` column is undefined for loss_type {unsupported}: a margin shifts the logit β·Δ, so it "
                f"applies only to {list(MARGIN_LOSS_TYPES)} (and 'sft' alongside). Remove the column or change "
                "`loss_type`."
            )
        if self.f_divergence_type != "reverse_kl":
            raise ValueError(
                f"A `margin` column needs `f_divergence_type='reverse_kl'`, got {self.f_divergence_type!r}: other "
                "divergences transform the log-ratios, so a margin no longer shifts β·Δ."
            )
        if self.beta <= 0:
            raise ValueError(f"A `margin` column needs `beta` > 0, got {self.beta}.")

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if MARGIN_COLUMN not in inputs:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        self._check_margin_supported()
        inputs = dict(inputs)
        margin = inputs.pop(MARGIN_COLUMN)
        if "ref_chosen_logps" not in inputs:
            ref_model = self.ref_model if self.ref_model is not None else self.model
            inputs["ref_chosen_logps"], inputs["ref_rejected_logps"] = self.compute_ref_log_probs(ref_model, inputs)
        ref_chosen = inputs["ref_chosen_logps"]
        inputs["ref_chosen_logps"] = ref_chosen + margin_as_logratio_offset(margin.to(ref_chosen), self.beta)
        with self.reference_logps_from_batch():
            result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        self._log_margin(margin)
        return result

    def _log_margin(self, margin: torch.Tensor) -> None:
        """Undo the margin in TRL's reward metrics (they saw the shifted reference) and log the mean margin."""
        self.shift_logged_rewards(self.accelerator.gather(margin.detach()).mean().item(), logged_as="margin")


def _column_names(dataset) -> list[str]:
    return list(getattr(dataset, "column_names", None) or [])
