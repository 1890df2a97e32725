"""GRPOConfig / GRPOTrainer: TRL's GRPO, extended (advantage estimators, dynamic sampling with refill, overlong).

Drop-in: with every extension at its default, ``trl_ext.GRPOTrainer`` behaves exactly like ``trl.GRPOTrainer``.
The recipes (DAPO, Dr GRPO, RLOO, Magistral) are configs with paper defaults on top of this class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import trl
from transformers.trainer_utils import SchedulerType

from trl_ext.core._checks import check_choice
from trl_ext.core.advantages import group_normalized, leave_one_out, minibatch_normalized
from trl_ext.core.preference import combine_rewards
from trl_ext.core.prompt_skipping import MIN_ROLLOUT_PROBABILITY
from trl_ext.hub import ModelCardMixin
from trl_ext.models import resolve_model
from trl_ext.resets import ReferenceResetArguments, ReferenceResetMixin
from trl_ext.rewards.length import OverlongPenalty
from trl_ext.trainers._trl_card import RecipeTagsMixin
from trl_ext.trainers._trl_checkpoint import CheckpointHooksMixin
from trl_ext.trainers._trl_hooks import (
    CompleteCheckpointPushMixin,
    GRPOHookMixin,
    require_trl_hooks,
)
from trl_ext.trainers._trl_vllm import colocated_engine_keeps_weights
from trl_ext.trainers.configs import resolve_config
from trl_ext.trainers.dynamic_sampling import (  # is_shaping_reward: its old import path
    DYNAMIC_SAMPLING_STATE_FILE,  # noqa: F401
    DynamicSamplingMixin,
    is_shaping_reward,  # noqa: F401
    is_trl_overlong,
)
from trl_ext.trainers.papers import RecipeCard, paper, paper_default

if TYPE_CHECKING:
    from transformers import PreTrainedModel

require_trl_hooks()

ADVANTAGE_ESTIMATORS = ("grpo", "dr_grpo", "rloo", "magistral")
ON_EXHAUSTED = ("fill", "raise")
PROMPT_SKIPPING = (None, "greso")


@dataclass
class GRPOConfig(trl.GRPOConfig, ReferenceResetArguments):
    r"""``trl.GRPOConfig`` plus the trl_ext extensions; every extension is off by default (stock TRL behaviour).

    Parameters (in addition to TRL's):
        advantage_estimator: "grpo" (TRL's own, honours ``scale_rewards``), "dr_grpo", "rloo" or "magistral".
        dynamic_sampling, dynamic_sampling_max_rounds, dynamic_sampling_reward_funcs, dynamic_sampling_on_exhausted,
        dynamic_sampling_max_round_groups: DAPO dynamic sampling with refill (rounds scored before any log-prob pass,
            sized to the missing groups and the running informative rate).
        prompt_skipping, prompt_skipping_target_informative_rate, prompt_skipping_exploration,
        prompt_skipping_min_rollout: GRESO prompt skipping before generation (arXiv 2506.02177).
        soft_overlong_punishment, overlong_cache_length, overlong_penalty_factor: DAPO Eq. 13 as an added reward.
    """

    advantage_estimator: str = field(
        default="grpo",
        metadata={
            "help": "How advantages are computed from the gathered rewards of the generation batch (all processes), "
            "with trl_ext.core. 'grpo' (default): TRL's own group normalisation, honouring `scale_rewards` and "
            "`multi_objective_aggregation`. 'dr_grpo': r − mean_group, no std division (arXiv 2503.20783). 'rloo': "
            "leave-one-out baseline r − mean of the other members (arXiv 2402.14740). 'magistral': group centring, "
            "then standardisation over all sequences of the optimizer step across processes (arXiv 2506.10910); "
            "needs steps_per_generation == gradient_accumulation_steps. With dynamic sampling, every estimator "
            "(TRL's 'grpo' included, with scale_rewards 'batch' over the kept batch) sees the kept batch only.",
            "choices": list(ADVANTAGE_ESTIMATORS),
        },
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={
            "help": "DAPO dynamic sampling (arXiv 2503.14476 §3.2): drop prompt groups whose filter reward has zero "
            "std (all correct or all wrong) and REFILL with further prompt groups until each process's batch holds "
            "only informative groups. Rounds only generate and score (no log-prob pass); TRL's step (old/reference "
            "log-probs, advantages, metrics, completions table) then runs once on the kept batch, and no reward "
            "function is called twice for a row. After the first round a round generates the missing groups divided "
            "by a running informative-rate estimate (checkpointed); once the rate is known a step needs one round or "
            "a second small one (see dynamic_sampling_round_margin). Refill prompts come from a second, identically sharded sampler over train_dataset (seeded with "
            "`seed` + 1), which must be map-style. Rounds are collective: every process generates the same number "
            "of groups per round, and the kept groups are pooled over the processes (each trains on its share). Not supported with tools, "
            "environment_factory, rollout_func or image prompts."
        },
    )
    dynamic_sampling_max_rounds: int = field(
        default=10,
        metadata={
            "help": "Maximum number of generation rounds per generation batch (the first one included) when "
            "`dynamic_sampling=True`. What happens when they run out is set by `dynamic_sampling_on_exhausted`."
        },
    )
    dynamic_sampling_reward_funcs: list[str] | None = field(
        default=None,
        metadata={
            "help": "Names of the reward functions (as TRL names them: the function's __name__, or the reward "
            "model's name) whose weighted sum is the filter metric of dynamic sampling. None (default): every "
            "reward function that is not a shaping term (shaping terms carry `trl_ext_shaping = True`, like the soft "
            "overlong punishment; TRL's get_soft_overlong_punishment counts as one too). The shaped total is never the default filter (it would keep groups whose "
            "only difference is length)."
        },
    )
    dynamic_sampling_on_exhausted: str = field(
        default="fill",
        metadata={
            "help": "What to do when `dynamic_sampling_max_rounds` rounds did not give a process enough informative "
            "groups. 'fill' (default): complete the batch with uninformative groups, whose advantage is set to 0 "
            "and whose tokens are left out of the loss and its normaliser (they neither add nor dilute gradient), "
            "and log a warning. 'raise': raise a RuntimeError.",
            "choices": list(ON_EXHAUSTED),
        },
    )
    dynamic_sampling_max_round_groups: int | None = field(
        default=None,
        metadata={
            "help": "Largest number of prompt groups one process generates in one dynamic-sampling round (rounds "
            "are sized to the missing groups divided by the informative rate). None (default): 8 × the groups of "
            "a generation batch per process. Lower it if generating that many rows at once does not fit in memory "
            "(transformers generation; vLLM batches by itself)."
        },
    )
    dynamic_sampling_round_margin: float = field(
        default=0.0,
        metadata={
            "help": "Safety margin of a dynamic-sampling round, in standard deviations of its informative-group "
            "count: a round generates ⌈(missing + margin·√(missing·(1 − rate))) / rate⌉ groups per process. 0 "
            "(default): a round expects exactly the missing groups, the fewest generated rows (about half the steps "
            "need a second, small round). 1: about one step in six needs a second round, for a few percent more "
            "generated rows at 64+ groups per process (more at small batches): worth it when a round's latency "
            "(its longest completion) dominates."
        },
    )
    prompt_skipping: str | None = field(
        default=None,
        metadata={
            "help": "Skip prompts before generation that recently taught nothing. 'greso' (GRESO, arXiv 2506.02177 "
            "§4): a prompt whose last z rollouts were all zero-variance is skipped with probability "
            "1 − max(p_e^z, prompt_skipping_min_rollout); p_e moves by 0.01 per generation batch inside "
            "[0.05, 0.95] to keep the informative rate of the rolled-out prompts near "
            "prompt_skipping_target_informative_rate. The per-prompt history is identical on every process and "
            "checkpointed. Needs dynamic_sampling=True. None (default): off.",
            "choices": list(PROMPT_SKIPPING),
        },
    )
    prompt_skipping_target_informative_rate: float = field(
        default=0.75,
        metadata={
            "help": "Target fraction of informative groups among the rolled-out prompts, in (0, 1]. GRESO's default "
            "target zero-variance rate is 0.25, i.e. 0.75."
        },
    )
    prompt_skipping_exploration: float = field(
        default=0.5,
        metadata={"help": "Initial exploration probability p_e of prompt skipping, in (0, 1). GRESO: 0.5."},
    )
    prompt_skipping_min_rollout: float = field(
        default=MIN_ROLLOUT_PROBABILITY,
        metadata={
            "help": "Every prompt is still rolled out with at least this probability, however long its streak of "
            "zero-variance rollouts (the minimum exploration rate), in (0, 1]. GRESO: 0.01."
        },
    )
    soft_overlong_punishment: bool = field(
        default=False,
        metadata={
            "help": "Add DAPO's soft overlong punishment (arXiv 2503.14476 Eq. 13) as an extra reward function: 0 "
            "up to max_completion_length − overlong_cache_length tokens, then a linear ramp down to "
            "−overlong_penalty_factor at max_completion_length. It is a shaping term, not a dynamic-sampling filter."
        },
    )
    overlong_cache_length: int | None = field(
        default=None,
        metadata={
            "help": "L_cache of the soft overlong punishment, in tokens. None (default): max_completion_length // 5, "
            "the paper's ratio (L_max = 20480, L_cache = 4096)."
        },
    )
    overlong_penalty_factor: float = field(
        default=1.0,
        metadata={
            "help": "Largest penalty of the soft overlong punishment: 1.0 in DAPO, 0.1 in Magistral's length "
            "penalty (arXiv 2506.10910 §2.2)."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        check_choice("advantage_estimator", self.advantage_estimator, ADVANTAGE_ESTIMATORS)
        check_choice("dynamic_sampling_on_exhausted", self.dynamic_sampling_on_exhausted, ON_EXHAUSTED)
        if isinstance(self.dynamic_sampling_reward_funcs, str):
            self.dynamic_sampling_reward_funcs = [self.dynamic_sampling_reward_funcs]
        if self.advantage_estimator != "grpo" and self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                f"advantage_estimator={self.advantage_estimator!r} works on the weighted sum of the rewards; it "
                "cannot be combined with multi_objective_aggregation="
                f"{self.multi_objective_aggregation!r}. Use multi_objective_aggregation='sum_then_normalize'."
            )
        if self.advantage_estimator == "rloo" and self.num_generations_eval == 1:
            raise ValueError(
                "advantage_estimator='rloo' needs at least 2 completions per prompt for its leave-one-out baseline, "
                "also in evaluation: num_generations_eval=1 is too few."
            )
        if self.advantage_estimator == "magistral" and self.steps_per_generation != self.gradient_accumulation_steps:
            raise ValueError(
                "advantage_estimator='magistral' standardises advantages over the sequences of one optimizer step, "
                f"which is the generation batch only when steps_per_generation ({self.steps_per_generation}) equals "
                f"gradient_accumulation_steps ({self.gradient_accumulation_steps}). Make them equal."
            )
        if self.dynamic_sampling:
            self._check_dynamic_sampling()
        self._check_prompt_skipping()
        if self.soft_overlong_punishment:
            self._check_overlong()
        self.validate_reference_resets()
        if self.reference_resets_enabled and self.beta == 0.0:
            raise ValueError(
                "Reference resets (ref_reset_steps / ref_reset_metric / ref_reset_kl_threshold) need a reference "
                "model, and beta=0 means there is none (no KL term). Set beta > 0 (ProRL: 1e-4) or turn resets off."
            )

    def _check_dynamic_sampling(self) -> None:
        if self.num_generations is None or self.num_generations < 2:
            raise ValueError(
                f"dynamic_sampling=True needs num_generations >= 2 (a group of one has no std), got {self.num_generations}."
            )
        if self.dynamic_sampling_max_rounds < 1:
            raise ValueError(f"dynamic_sampling_max_rounds must be >= 1, got {self.dynamic_sampling_max_rounds}.")
        if self.dynamic_sampling_round_margin < 0:
            raise ValueError(f"dynamic_sampling_round_margin must be >= 0, got {self.dynamic_sampling_round_margin}.")
        if self.dynamic_sampling_max_round_groups is not None and self.dynamic_sampling_max_round_groups < 1:
            raise ValueError(
                f"dynamic_sampling_max_round_groups must be >= 1 or None, got {self.dynamic_sampling_max_round_groups}."
            )
        local = self.per_device_train_batch_size * self.steps_per_generation
        if local % self.num_generations != 0:
            raise ValueError(
                "dynamic_sampling=True keeps or drops whole prompt groups on each process, so a group must not "
                f"straddle two processes: per_device_train_batch_size × steps_per_generation ({local}) must be a "
                f"multiple of num_generations ({self.num_generations})."
            )

    def _check_prompt_skipping(self) -> None:
        check_choice("prompt_skipping", self.prompt_skipping, PROMPT_SKIPPING)
        if self.prompt_skipping is None:
            return
        if not self.dynamic_sampling:
            raise ValueError(
                f"prompt_skipping={self.prompt_skipping!r} skips prompts for dynamic sampling's refills, but "
                "dynamic_sampling=False. Set dynamic_sampling=True or prompt_skipping=None."
            )
        for name, value, closed_high in (
            ("prompt_skipping_target_informative_rate", self.prompt_skipping_target_informative_rate, True),
            ("prompt_skipping_exploration", self.prompt_skipping_exploration, False),
            ("prompt_skipping_min_rollout", self.prompt_skipping_min_rollout, True),
        ):
            if not (0.0 < value <= 1.0 if closed_high else 0.0 < value < 1.0):
                interval = "(0, 1]" if closed_high else "(0, 1)"
                raise ValueError(f"{name} must lie in {interval}, got {value}.")

    def _check_overlong(self) -> None:
        cache = self.overlong_cache_length
        if cache is not None and not 0 < cache <= self.max_completion_length:
            raise ValueError(
                f"overlong_cache_length must lie in (0, max_completion_length={self.max_completion_length}], got {cache}."
            )
        if self.overlong_penalty_factor < 0:
            raise ValueError(f"overlong_penalty_factor must be >= 0, got {self.overlong_penalty_factor}.")


@dataclass
class PaperGRPOConfig(GRPOConfig):
    """``GRPOConfig`` with the defaults every paper recipe of the family (DAPO, Dr. GRPO, RLOO, ProRL, Magistral)
    shares; each recipe's Config adds its paper's own on top."""

    lr_scheduler_type: SchedulerType | str = paper_default(
        "constant", "The papers keep the learning rate constant (DAPO after 20 warm-up steps: 'constant_with_warmup')."
    )
    vllm_importance_sampling_correction: bool = paper_default(
        False, "TRL's vLLM importance-sampling correction; the papers have none: off (True turns TRL's on)."
    )


class GRPOTrainer(
    ModelCardMixin,
    CompleteCheckpointPushMixin,
    DynamicSamplingMixin,
    ReferenceResetMixin,
    CheckpointHooksMixin,
    GRPOHookMixin,
    RecipeTagsMixin,
    trl.GRPOTrainer,
):
    """``trl.GRPOTrainer`` with trl_ext's extensions (see :class:`GRPOConfig`); the same arguments and, with the
    extensions off, the same behaviour step for step.

    Advantages other than 'grpo' are computed with ``trl_ext.core`` on the gathered rewards of all processes and
    this process's rows are sliced out. Dynamic sampling refills: it generates further rounds of prompt groups (every
    rank the same number of rounds, since generation gathers) until all ranks together hold enough informative groups,
    which are then pooled: each rank trains on its share.
    """

    recipe_card = RecipeCard(
        name="GRPO",
        tags=("trl", "grpo", "trl-ext"),
        paper=paper(
            "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
            "2402.03300",
            "shao2024deepseekmath",
            "Zhihong Shao and Peiyi Wang and Qihao Zhu and Runxin Xu and Junxiao Song and Mingchuan "
            "Zhang and Y. K. Li and Y. Wu and Daya Guo",
            2024,
        ),
    )
    config_class = GRPOConfig

    def __init__(
        self,
        model: str | PreTrainedModel,
        reward_funcs: Any = None,
        args: trl.GRPOConfig | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        reward_processing_classes: Any = None,
        **kwargs: Any,
    ):
        args = resolve_config(type(self), model, args)  # a plain trl.GRPOConfig: extensions off
        model = resolve_model(model, args, kwargs)  # an adapter repo/dir: its base + the adapter, trainable
        if reward_funcs is None:
            reward_funcs = []
        reward_funcs = list(reward_funcs) if isinstance(reward_funcs, list) else [reward_funcs]
        if args.soft_overlong_punishment:
            reward_funcs, reward_processing_classes = self._add_overlong_reward(
                args, reward_funcs, reward_processing_classes
            )
        with colocated_engine_keeps_weights(args):
            super().__init__(
                model,
                reward_funcs,
                args,
                train_dataset,
                eval_dataset,
                processing_class,
                reward_processing_classes,
                **kwargs,
            )
        self._init_dynamic_sampling(train_dataset)
        self._init_reference_resets()

    @staticmethod
    def _add_overlong_reward(args, reward_funcs: list, reward_processing_classes):
        if any(is_trl_overlong(func) for func in reward_funcs):
            raise ValueError(
                "reward_funcs already holds TRL's get_soft_overlong_punishment and soft_overlong_punishment=True adds "
                "trl_ext's: the penalty would count twice. Remove TRL's or set soft_overlong_punishment=False."
            )
        cache = args.overlong_cache_length or max(args.max_completion_length // 5, 1)
        punishment = OverlongPenalty(
            args.max_completion_length, cache, args.overlong_penalty_factor, name="soft_overlong_punishment"
        )
        # The added function needs a weight and a processing class next to the user's ones; the check on the length
        # keeps a config reused for a second trainer from getting a second 1.0.
        if args.reward_weights is not None and len(args.reward_weights) == len(reward_funcs):
            args.reward_weights = [*args.reward_weights, 1.0]
        if reward_processing_classes is not None:
            if not isinstance(reward_processing_classes, list):
                reward_processing_classes = [reward_processing_classes]
            reward_processing_classes = [*reward_processing_classes, None]
        return [*reward_funcs, punishment], reward_processing_classes

    # --- generation, filtering and advantages -------------------------------------------------------------------

    def generate_and_score(self, inputs: list[dict]) -> dict:
        """TRL's generation and scoring, with dynamic sampling (training only) and the configured estimator."""
        sampling = self.model.training and self.args.dynamic_sampling
        if sampling:
            output, total = self._dynamic_sampling(inputs)
        else:
            output, rewards_per_func = self.trl_generate_round(inputs)
            total = None
        estimator = self.args.advantage_estimator
        if estimator == "grpo":
            return output  # TRL's own advantages (for filled groups set to 0 by dynamic sampling)
        if total is None:
            total = combine_rewards(rewards_per_func, self.reward_weights.to(rewards_per_func.device))
        group_size = self.num_generations if self.model.training else self.num_generations_eval
        advantages = self.compute_advantages(total, group_size, estimator)
        local, rank = output["completion_ids"].shape[0], self.accelerator.process_index
        output["advantages"] = advantages[rank * local : (rank + 1) * local].to(output["advantages"])
        self.replace_logged_advantages(advantages)  # TRL's completions table holds exactly these rows
        return output

    @staticmethod
    def compute_advantages(rewards: torch.Tensor, group_size: int, estimator: str) -> torch.Tensor:
        """Advantages of the whole (gathered) batch with ``trl_ext.core``; NaN rewards get advantage 0."""
        if estimator == "dr_grpo":
            return group_normalized(rewards, group_size, scale="none")
        if estimator == "rloo":
            return leave_one_out(rewards, group_size)
        if estimator == "magistral":
            # The gathered batch is exactly one optimizer step (validated), so one minibatch.
            return minibatch_normalized(rewards, group_size, minibatch_size=rewards.numel())
        return group_normalized(rewards, group_size, scale="group")
