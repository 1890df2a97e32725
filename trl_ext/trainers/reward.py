"""Reward modelling on listwise (K-ranked or K-scored) data as well as TRL's pairwise data.

A listwise dataset (``completions`` plus ``ranking`` or ``scores``, see ``trl_ext.data.listwise``) is expanded
into every ordered pair, each weighted so that its prompt counts once (InstructGPT, arXiv 2203.02155), with an
optional margin from the score gap (Llama 2, arXiv 2307.09288). Pairwise data goes through TRL unchanged. The
trained model is a plain ``AutoModelForSequenceClassification`` with one label, usable as a GRPO/PPO reward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from datasets import IterableDataset
from trl import RewardConfig as TRLRewardConfig
from trl import RewardTrainer as TRLRewardTrainer

from trl_ext.core.preference import bradley_terry_loss
from trl_ext.data.collators import FloatColumnCollator
from trl_ext.data.listwise import expand_listwise, is_listwise
from trl_ext.hub import ModelCardMixin
from trl_ext.trainers._trl_card import RecipeTagsMixin
from trl_ext.trainers._trl_hooks import CompleteCheckpointPushMixin, require_trl_hooks
from trl_ext.trainers._trl_reward import REWARD_HOOKS, RewardHookMixin
from trl_ext.trainers.configs import resolve_config
from trl_ext.trainers.papers import RecipeCard, paper

WEIGHT_COLUMN = "weight"

require_trl_hooks(TRLRewardTrainer, REWARD_HOOKS)


@dataclass
class RewardConfig(TRLRewardConfig):
    r"""Configuration for [`RewardTrainer`]: TRL's RewardConfig plus the listwise-data options.

    Listwise rows are expanded into all ordered pairs; with ``listwise_pair_weighting`` each pair weighs 1/P for
    the P pairs of its prompt (1/C(K, 2) without ties), rescaled by the dataset's mean weight so the loss keeps the
    scale of an unweighted mean (InstructGPT, arXiv 2203.02155, Eq. 1).

    Parameters:
        listwise_pair_weighting (`bool`, *optional*, defaults to `True`):
            Weight each pair expanded from a listwise row by 1/(number of pairs of its prompt), so that every prompt
            counts once. If `False`, a prompt with K ranked completions counts C(K, 2) times.
        listwise_margin_scale (`float`, *optional*):
            If set, each pair expanded from a listwise row with `scores` gets the margin
            `listwise_margin_scale * (score_better - score_worse)` (Llama 2, arXiv 2307.09288). Needs `scores`.
    """

    listwise_pair_weighting: bool = field(
        default=True,
        metadata={
            "help": "Weight each pair expanded from a listwise row by 1/(number of pairs of its prompt), so every "
            "prompt counts once (InstructGPT). If False, a prompt with K ranked completions counts C(K, 2) times."
        },
    )
    listwise_margin_scale: float | None = field(
        default=None,
        metadata={
            "help": "If set, each pair expanded from a listwise row with `scores` gets the margin "
            "`listwise_margin_scale * (score_better - score_worse)`, and the loss becomes "
            "-log σ(r_chosen - r_rejected - margin) (Llama 2). None: no margin. Needs `scores`, not `ranking`."
        },
    )


class RewardTrainer(ModelCardMixin, CompleteCheckpointPushMixin, RewardHookMixin, RecipeTagsMixin, TRLRewardTrainer):
    """TRL's RewardTrainer that also accepts listwise data (see the module docstring); pairwise data is unchanged."""

    config_class = RewardConfig
    recipe_card = RecipeCard(
        name="Reward",
        tags=("trl", "trl-ext", "reward-trainer"),
        paper=paper(
            "Training language models to follow instructions with human feedback", "2203.02155", "ouyang2022training",
            "Long Ouyang and Jeffrey Wu and Xu Jiang and Diogo Almeida and Carroll L. Wainwright and Pamela Mishkin and "
            "Chong Zhang and Sandhini Agarwal and Katarina Slama and Alex Ray and John Schulman and Jacob Hilton and "
            "Fraser Kelton and Luke Miller and Maddie Simens and Amanda Askell and Peter Welinder and Paul F. Christiano "
            "and Jan Leike and Ryan Lowe", 2022, entry="inproceedings", eprint=False,
            booktitle="Advances in Neural Information Processing Systems 35: Annual Conference on Neural Information "
            "Processing Systems 2022, NeurIPS 2022",
        ),
    )  # fmt: skip

    def __init__(self, model: Any, args: TRLRewardConfig | None = None, *more: Any, **kwargs: Any):
        super().__init__(model, resolve_config(type(self), model, args), *more, **kwargs)  # plain config: TRL pairs
        self.data_collator = FloatColumnCollator(self.data_collator, WEIGHT_COLUMN)

    def expand_dataset(self, dataset, args, dataset_name):
        """Listwise data (K ranked completions per prompt) as weighted pairs; pairwise data as it is."""
        if is_listwise(getattr(dataset, "column_names", None) or []):
            if isinstance(dataset, IterableDataset):
                raise ValueError(
                    f"Listwise {dataset_name} data must be a map-style `Dataset`, not an IterableDataset."
                )
            dataset = expand_listwise(
                dataset,
                margin_scale=args.listwise_margin_scale,
                normalize_weights=True,
            )
            if not args.listwise_pair_weighting:
                dataset = dataset.remove_columns(WEIGHT_COLUMN)
        return dataset

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if WEIGHT_COLUMN not in inputs:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        inputs = dict(inputs)
        weight = inputs.pop(WEIGHT_COLUMN)
        # TRL runs the forward and logs its metrics; its unweighted loss is replaced by the weighted one.
        _, outputs = super().compute_loss(model, inputs, True, num_items_in_batch)
        chosen, rejected = torch.chunk(outputs.logits.squeeze(-1), chunks=2)
        loss = bradley_terry_loss(
            chosen, rejected, inputs.get("margin"), weight.to(chosen), self.args.center_rewards_coefficient
        )
        return (loss, outputs) if return_outputs else loss
