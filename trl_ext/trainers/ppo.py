"""PPOConfig / PPOTrainer: PPO with a critic and GAE (Schulman et al. 2017; InstructGPT, Ouyang et al. 2022),
rebuilt on TRL's GRPO stack (TRL removed its own PPOTrainer in 1.13).

Rollout (once per generation batch): TRL generates and scores; this trainer turns the sequence score into per-token
rewards with the KL penalty in the reward, asks the critic for V_old, runs GAE, whitens the advantages with global
statistics and hands TRL's clipped-surrogate loss (B, T) advantages. The critic is trained on the same micro-batches
with the clipped value loss and its own optimizer (the critic model and its loading: ``trl_ext.trainers.critic``,
re-exported here). Every formula comes from ``trl_ext.core``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import (
    PreTrainedModel,
)
from transformers.trainer_utils import SchedulerType

from trl_ext.core.advantages import gae, whiten
from trl_ext.core.kl import KL_KINDS, kl_estimate
from trl_ext.core.losses import clipped_value_loss
from trl_ext.core.ppo import adaptive_kl_coef, explained_variance, token_rewards, value_clip_fraction
from trl_ext.core.preference import combine_rewards
from trl_ext.trainers._trl_hooks import require_trl_hooks
from trl_ext.trainers._trl_ppo import PPO_TRL_HOOKS, PPOHookMixin, reference_model_kept
from trl_ext.trainers.configs import resolve_config
from trl_ext.trainers.critic import TokenValueModel, load_value_model  # noqa: F401  (re-exported)
from trl_ext.trainers.critic_training import (  # noqa: F401  (re-exported)
    CRITIC_DIR,
    CRITIC_OPTIMIZER_NAME,
    CRITIC_SCHEDULER_NAME,
    PPO_STATE_NAME,
    CriticTrainingMixin,
)
from trl_ext.trainers.grpo import GRPOConfig, GRPOTrainer
from trl_ext.trainers.papers import RecipeCard, paper

require_trl_hooks(None, PPO_TRL_HOOKS)


@dataclass
class PPOConfig(GRPOConfig):
    r"""Configuration for :class:`PPOTrainer`: TRL's GRPO arguments plus the PPO knobs, with the papers' defaults.

    Defaults: one completion per prompt (``num_generations=1``; GAE needs no groups), KL in the reward with k1 and
    ``kl_coef=0.02`` (InstructGPT App. C.4), a constant learning rate, ``gamma=1``, ``lam=0.95``, clipped surrogate with ε = 0.2,
    token-mean loss (``loss_type="dapo"``), clipped value loss with ``cliprange_value=0.2``, whitened advantages,
    dropout off. TRL's ``beta`` stays TRL's KL-in-loss (k3) coefficient and defaults to 0: set ``kl_coef=0`` and
    ``beta>0`` for KL in the loss instead of the reward. Dual clip (Ye et al. 2020) is TRL's ``delta``.
    """

    num_generations: int | None = field(
        default=1,
        metadata={
            "help": "Completions sampled per prompt. PPO's GAE advantages need no groups, so the default is 1 (TRL's "
            "GRPOConfig demands >= 2; PPOConfig lifts that rule). With 1, per_device_train_batch_size × "
            "steps_per_generation must be >= 2. Larger values simply sample several completions per prompt."
        },
    )
    beta: float = field(
        default=0.0,
        metadata={
            "help": "TRL's KL-in-LOSS coefficient (k3 added to the per-token loss). PPO puts the KL in the reward "
            "(`kl_coef`) instead, so the default is 0. Set kl_coef=0 and beta>0 for the KL-in-loss variant."
        },
    )
    loss_type: str = field(
        default="dapo",
        metadata={"help": "Policy-loss aggregation; 'dapo' is the token mean over the batch."},
    )
    disable_dropout: bool = field(
        default=True,
        metadata={
            "help": "Disable dropout in the policy, reference and critic, so that log-probs and values at rollout "
            "and in the loss agree (Huang et al. 2022, 'The 37 implementation details of PPO')."
        },
    )
    delta: float | None = field(
        default=None,
        metadata={
            "help": "Dual clip c (Ye et al. 2020, arXiv 1912.09729 Eq. 5): where A < 0 the per-token loss is capped "
            "at −A·c. TRL's two-sided clipping `delta` is exactly this when c > 1 + epsilon_high, which PPOConfig "
            "enforces. None (default): no dual clip."
        },
    )
    kl_coef: float = field(
        default=0.02,
        metadata={
            "help": "β of the KL penalty in the REWARD: every completion token gets −β·KL(logπ_old, logπ_ref) "
            "(InstructGPT, Ouyang et al. 2022 Eq. 2; β = 0.02 in its App. C.4). 0 turns it off (and, unless kl_target is set, no reference "
            "model is loaded). With `kl_target` set, this is the initial value of the adaptive coefficient."
        },
    )
    kl_estimator: str = field(
        default="k1",
        metadata={
            "help": "Per-token KL estimator of the reward penalty: 'k1' = logπ_old − logπ_ref (InstructGPT), 'k2', "
            "or 'k3' (Schulman 2020, 'Approximating KL Divergence').",
            "choices": list(KL_KINDS),
        },
    )
    kl_target: float | None = field(
        default=None,
        metadata={
            "help": "Target KL per sequence of the adaptive KL controller (Ziegler et al. 2019 §2.2): after each "
            "rollout β ← β·(1 + clip(KL/kl_target − 1, −0.2, 0.2)·n/kl_horizon), n the sequences of the batch. "
            "None (default): fixed kl_coef."
        },
    )
    kl_horizon: int = field(
        default=10000,
        metadata={"help": "Horizon K of the adaptive KL controller, in sequences (Ziegler et al. 2019 use 10000)."},
    )
    gamma: float = field(
        default=1.0, metadata={"help": "Discount factor γ of GAE, in [0, 1] (1 for language-model PPO)."}
    )
    lam: float = field(
        default=0.95,
        metadata={"help": "GAE λ (Schulman et al. 2016, arXiv 1506.02438), in [0, 1]: 1 = Monte Carlo, 0 = TD(0)."},
    )
    whiten_advantages: bool = field(
        default=True,
        metadata={
            "help": "Whiten the GAE advantages over the valid tokens of the whole generation batch, with statistics "
            "reduced across processes (mean 0, variance 1)."
        },
    )
    vf_coef: float = field(
        default=0.1,
        metadata={
            "help": "Weight of the clipped value loss; it only scales the critic's gradient, since the critic has "
            "its own parameters and optimizer."
        },
    )
    cliprange_value: float = field(
        default=0.2,
        metadata={
            "help": "Value clipping c: the loss is ½·max((V − R)², (clip(V, V_old − c, V_old + c) − R)²) "
            "(baselines ppo2; Huang et al. 2022 detail #9). Must be > 0."
        },
    )
    critic_learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Learning rate of the critic's AdamW optimizer (same betas, eps, weight decay, schedule and "
            "warm-up as the policy's). None: `learning_rate`."
        },
    )
    lr_scheduler_type: SchedulerType | str = field(
        default="constant", metadata={"help": "InstructGPT's PPO keeps the learning rate constant."}
    )
    value_model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Critic to load when PPOTrainer gets no `value_model` argument: a causal-LM or reward-model "
            "checkpoint sharing the policy's tokenizer (loaded as a sequence classifier with one label; a causal "
            "LM gets a fresh scalar head). None: the critic starts from the policy's weights with a fresh head."
        },
    )

    def __post_init__(self):
        self._check_ppo_fields()
        requested = self.num_generations
        if requested == 1:
            self._lift_group_rule()
        super().__post_init__()
        self.num_generations = requested

    def _check_ppo_fields(self) -> None:
        self._check_ranges()
        epsilon_high = self.epsilon if self.epsilon_high is None else self.epsilon_high
        if self.delta is not None and self.delta <= 1.0 + epsilon_high:
            raise ValueError(
                f"PPOConfig.delta is the dual clip c and must be > 1 + epsilon_high = {1.0 + epsilon_high}, got "
                f"{self.delta} (smaller values would also clip positive advantages)."
            )
        if self.kl_estimator not in KL_KINDS:
            raise ValueError(f"Unknown PPOConfig.kl_estimator={self.kl_estimator!r}; expected one of {KL_KINDS}.")
        if self.advantage_estimator != "grpo" or self.dynamic_sampling:
            raise ValueError(
                "PPOConfig computes GAE advantages from a critic; advantage_estimator and dynamic_sampling (GRPO-family "
                f"options) do not apply. Leave them at their defaults, got advantage_estimator="
                f"{self.advantage_estimator!r}, dynamic_sampling={self.dynamic_sampling}."
            )
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                "PPO scores each completion with the weighted sum of the rewards; multi_objective_aggregation must be "
                f"'sum_then_normalize', got {self.multi_objective_aggregation!r}."
            )

    def _check_ranges(self) -> None:
        for name in ("gamma", "lam"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"PPOConfig.{name} must lie in [0, 1], got {getattr(self, name)}.")
        for name in ("kl_coef", "vf_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"PPOConfig.{name} must be >= 0, got {getattr(self, name)}.")
        for name in ("cliprange_value", "kl_horizon", "kl_target", "critic_learning_rate"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"PPOConfig.{name} must be > 0, got {value}.")

    def _lift_group_rule(self) -> None:
        """TRL refuses num_generations < 2 in GRPOConfig.__post_init__ (group baselines need two members). PPO does
        not, so TRL's checks run with a stand-in group size that divides the generation batch, then 1 is restored."""
        steps = self.steps_per_generation or self.gradient_accumulation_steps
        stand_in = self.generation_batch_size or self.per_device_train_batch_size * steps
        if stand_in < 2:
            raise ValueError(
                "PPOConfig with num_generations=1 needs at least two completions per process and generation batch: "
                f"per_device_train_batch_size × steps_per_generation is {stand_in}. Raise one of them."
            )
        self.num_generations_eval = self.num_generations_eval or 1
        self.num_generations = stand_in


class PPOTrainer(CriticTrainingMixin, PPOHookMixin, GRPOTrainer):
    """PPO with a learned critic (Schulman et al. 2017) and GAE, KL penalty in the reward (InstructGPT), on TRL's GRPO
    machinery: TRL's datasets (plain or conversational prompts), reward functions and reward-model ids, vLLM, PEFT
    for the policy, accelerate and the Hub.

    Paper knobs (:class:`PPOConfig`): ``kl_coef`` (β, k1 per token in the reward, optional adaptive controller
    ``kl_target``/``kl_horizon``), ``gamma``/``lam`` (GAE), ``epsilon``/``epsilon_high`` (ratio clip), ``delta``
    (dual clip), ``vf_coef``/``cliprange_value`` (clipped value loss), ``critic_learning_rate``,
    ``num_iterations`` (PPO epochs over a rollout), ``steps_per_generation`` (minibatches per rollout).

    Rollout: r_t = −β·KL_t on every completion token plus the score on the last one; V_old from the critic; GAE over
    valid tokens; returns = A + V_old; A whitened over the global batch (sums reduced across processes). TRL's loss
    receives (B, T) advantages; the clipped value loss (÷ gradient accumulation steps) is added to it and the critic
    takes its own optimizer step when the policy does. The critic is saved in ``<output_dir>/critic``
    (``AutoModelForSequenceClassification.from_pretrained``) and, with its optimizer, scheduler and the KL coefficient,
    in every checkpoint, so resuming is exact. Completions whose every reward is None get no advantage and no value
    target.

    Differences from TRL's removed ``PPOTrainer`` (≤ 1.12): this one takes prompts in TRL's dataset formats instead
    of pre-tokenized queries, any TRL reward function (callable, reward model, Hub id) instead of a single reward
    model, uses TRL's generation (vLLM included) and ``Trainer`` loop (checkpoints, resume, callbacks) instead of its
    own loop, keeps the critic in a separate model with its own optimizer instead of a policy-and-value wrapper, and
    whitens advantages with global statistics. It has no ``missing_eos_penalty`` (use a reward function). Supported:
    single process, DDP and DeepSpeed ZeRO-1/2 (the critic is a DDP replica with a torch optimizer); ZeRO-3, FSDP and
    fp16 raise a clear error.
    """

    config_class = PPOConfig
    recipe_card = RecipeCard(
        name="PPO",
        tags=("trl", "trl-ext", "ppo"),
        paper=paper(
            "Proximal Policy Optimization Algorithms", "1707.06347", "schulman2017proximal",
            "John Schulman and Filip Wolski and Prafulla Dhariwal and Alec Radford and Oleg Klimov", 2017,
        ),
    )  # fmt: skip

    def __init__(
        self,
        model: str | PreTrainedModel,
        reward_funcs: Any = None,
        args: PPOConfig | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        reward_processing_classes: Any = None,
        value_model: str | PreTrainedModel | None = None,
        **kwargs: Any,
    ):
        args = resolve_config(type(self), model, args)
        _check_supported_setup(args)
        if value_model is not None and args.value_model_name_or_path is not None:
            raise ValueError(
                "Pass the critic either as PPOTrainer(value_model=...) or as PPOConfig.value_model_name_or_path, "
                "not both."
            )
        self._needs_reference = args.kl_coef > 0 or args.kl_target is not None
        with reference_model_kept(args, self._needs_reference):
            super().__init__(
                model, reward_funcs, args, train_dataset, eval_dataset, processing_class, reward_processing_classes,
                **kwargs,
            )  # fmt: skip
        self.restore_loss_beta()
        if self.is_fsdp_enabled or (
            self.is_deepspeed_enabled and self.accelerator.state.deepspeed_plugin.zero_stage > 2
        ):
            raise NotImplementedError(_UNSUPPORTED_MESSAGE)
        self.kl_coef = float(args.kl_coef)
        self.critic = self._prepare_critic(TokenValueModel(self._build_critic(value_model)))
        self.critic_optimizer: torch.optim.Optimizer | None = None
        self.critic_lr_scheduler: torch.optim.lr_scheduler.LRScheduler | None = None

    # --- rollout ----------------------------------------------------------------------------------------------------

    def generate_and_score(self, inputs: list[dict]) -> dict:
        """TRL's generation and scoring, then the PPO rollout: per-token rewards, V_old, GAE, whitened advantages."""
        with self.reference_logps_requested():
            output, rewards_per_func = self.trl_generate_round(inputs)
        local, rank = output["completion_ids"].shape[0], self.accelerator.process_index
        scores = combine_rewards(rewards_per_func, self.reward_weights.to(rewards_per_func.device))[
            rank * local : (rank + 1) * local
        ]
        self.add_ppo_rollout(output, scores.to(output["completion_mask"].device))
        return output

    def add_ppo_rollout(self, output: dict, scores: torch.Tensor) -> None:
        """Write ``advantages`` (B, T), ``values`` (V_old), ``returns`` and ``value_mask`` into TRL's batch."""
        mask = output["completion_mask"] * output.get("tool_mask", 1)
        mask = mask * (~torch.isnan(scores)).unsqueeze(1)  # unscorable completions: no advantage, no value target
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        if output.get("old_per_token_logps") is None:
            output["old_per_token_logps"] = self.policy_logps(input_ids, attention_mask, mask.shape[1])
        with torch.no_grad():
            values = self._token_values(input_ids, attention_mask, mask.shape[1])
        kl = self._rollout_kl(output, mask)
        rewards = token_rewards(torch.nan_to_num(scores, nan=0.0), kl, mask, self.kl_coef)
        advantages, returns = gae(rewards, values, mask, self.args.gamma, self.args.lam)
        if self.args.whiten_advantages:
            advantages = self._whiten(advantages, mask)
        output.update(advantages=advantages, values=values, returns=returns, value_mask=mask)
        self._log_rollout(kl, values, returns, advantages, mask)

    def _rollout_kl(self, output: dict, mask: torch.Tensor) -> torch.Tensor:
        if not self._needs_reference:
            return torch.zeros_like(mask, dtype=torch.float32)
        if output.get("ref_per_token_logps") is None:
            raise RuntimeError(
                "TRL's _generate_and_score_completions returned no ref_per_token_logps although the trainer's beta "
                "was non-zero; this TRL version computes reference log-probs differently than trl_ext expects."
            )
        kl = kl_estimate(output["old_per_token_logps"], output["ref_per_token_logps"], self.args.kl_estimator)
        return kl * mask

    def _token_values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, length: int) -> torch.Tensor:
        """V(s_t) for each completion token t: the critic's value of the prefix ending just before t."""
        return self.critic(input_ids=input_ids, attention_mask=attention_mask)[:, -length - 1 : -1]

    def _all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.accelerator.reduce(tensor, reduction="sum")

    def _whiten(self, advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self._all_reduce_sum(mask.sum().float()) < 2:
            return torch.zeros_like(advantages)  # nothing to learn from: every completion masked or unscorable
        return whiten(advantages, mask, all_reduce_sum=self._all_reduce_sum)

    def _log_rollout(
        self,
        kl: torch.Tensor,
        values: torch.Tensor,
        returns: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
    ) -> None:
        rows = (mask.sum(dim=1) > 0).float()
        sums = self._all_reduce_sum(
            torch.stack([(kl * mask).sum(), rows.sum(), (returns * mask).sum(), (values * mask).sum(), mask.sum()])
        )
        mean_kl = (sums[0] / sums[1].clamp(min=1)).item()  # KL per sequence (summed over its tokens)
        self.record_metric("ppo/kl", mean_kl)
        self.record_metric("ppo/kl_coef", self.kl_coef)
        self.record_metric("ppo/returns_mean", (sums[2] / sums[4].clamp(min=1)).item())
        self.record_metric("ppo/values_mean", (sums[3] / sums[4].clamp(min=1)).item())
        self.record_metric(
            "ppo/explained_variance", explained_variance(values, returns, mask, self._all_reduce_sum).item()
        )
        sequence_advantage = (advantages * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        self.replace_logged_advantages(self.accelerator.gather(sequence_advantage))
        if self.model.training and self.args.kl_target is not None:
            self.kl_coef = adaptive_kl_coef(
                self.kl_coef, mean_kl, self.args.kl_target, self.args.kl_horizon, int(sums[1].item())
            )

    # --- loss and critic update -------------------------------------------------------------------------------------

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor:
        """TRL's policy loss plus vf_coef × the clipped value loss, scaled for gradient accumulation like TRL's."""
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        value_loss = self.value_loss(inputs)
        normalizer = self.current_gradient_accumulation_steps if self.model.training else 1.0
        return loss + self.args.vf_coef * value_loss / normalizer

    def value_loss(self, inputs: dict) -> torch.Tensor:
        """The clipped value loss of the critic on one micro-batch (``trl_ext.core.losses.clipped_value_loss``)."""
        length = inputs["completion_ids"].shape[1]
        input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        values = self._token_values(input_ids, attention_mask, length)
        old, returns, mask = inputs["values"], inputs["returns"], inputs["value_mask"]
        loss = clipped_value_loss(values, old, returns, mask, self.args.cliprange_value)
        clipfrac = value_clip_fraction(values.detach(), old, returns, mask, self.args.cliprange_value)
        metrics = self.accelerator.gather(torch.stack([loss.detach(), clipfrac])).view(-1, 2).mean(dim=0)
        self.record_metric("ppo/value_loss", metrics[0].item())
        self.record_metric("ppo/value_clipfrac", metrics[1].item())
        return loss

    def training_step(
        self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: torch.Tensor | int | None = None
    ) -> torch.Tensor:
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.accelerator.sync_gradients:  # the policy's optimizer steps after this micro-batch: so does the critic
            self._critic_optimizer_step()
        return loss


_UNSUPPORTED_MESSAGE = (
    "PPOTrainer trains its critic (a DDP replica on every process) with a second optimizer. Supported: a single "
    "process, DDP (accelerate launch --multi_gpu, or torchrun; CPU or GPU) and DeepSpeed ZeRO-1/2 for the policy, in "
    "fp32 or bf16. Not supported yet: DeepSpeed ZeRO-3, FSDP and fp16 loss scaling. Use a ZeRO-2 or DDP launch "
    "config and bf16."
)


def _check_supported_setup(args: PPOConfig) -> None:
    zero3 = args.deepspeed_plugin is not None and args.deepspeed_plugin.zero_stage == 3
    if zero3 or args.fsdp or args.fp16:
        raise NotImplementedError(_UNSUPPORTED_MESSAGE)
