"""Dynamic sampling with refill (DAPO, arXiv 2503.14476 §3.2), as one trainer mixin.

A step generates and scores rounds of prompt groups (no log-prob pass) until all processes together hold enough
informative groups, pools the kept groups over the processes (each group moves whole: its prompt rows, TRL's generation
of it with vLLM's sampling log-probs, its reward-function log columns) and hands each process's share to TRL's step once (``GRPOHookMixin.trl_step_on``, the replay). The bookkeeping
that every rank decides alike from gathered outcomes lives in ``_dynamic_sampling``; the private TRL touches in
``_trl_hooks``; the checkpoint hooks in ``_trl_checkpoint`` (this mixin saves its state through them).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch

from trl_ext.core.filtering import informative_groups
from trl_ext.core.preference import combine_rewards
from trl_ext.trainers import _dynamic_sampling as ds
from trl_ext.trainers._prompt_skipping import PromptSkipper, prompt_key
from trl_ext.trainers._trl_hooks import Rollout, vllm_sleep_once

logger = logging.getLogger(__name__)

DYNAMIC_SAMPLING_STATE_FILE = "trl_ext_dynamic_sampling.json"


class Round(NamedTuple):
    """One generation round of a step on this process: its rows (one per completion), TRL's generation of them, the
    GATHERED (P·B, F) rewards of every process's rows, and the completions-table columns reward functions logged."""

    rows: list[dict]
    rollout: Rollout
    rewards_per_func: torch.Tensor
    extra_logs: dict[str, list]

    def group(self, rank: int, index: int, group_size: int) -> Round:
        """Group ``index`` of this process (``rank``) alone: the record that moves whole to the process training on
        it (its rewards are the group's rows of the gathered tensor, on the CPU)."""
        rows = range(index * group_size, (index + 1) * group_size)
        start = rank * len(self.rows) + index * group_size
        return Round(
            [self.rows[i] for i in rows],
            Rollout.of_rows([self.rollout], [(0, i) for i in rows]),
            self.rewards_per_func[start : start + group_size].cpu(),
            {column: [values[i] for i in rows] if values else None for column, values in self.extra_logs.items()},
        )


def is_shaping_reward(reward_func: Callable) -> bool:
    """Whether a reward function is a shaping term: it declares ``trl_ext_shaping = True``, or it is TRL's own
    soft overlong punishment (``trl.rewards.get_soft_overlong_punishment``)."""
    while isinstance(reward_func, functools.partial):
        reward_func = reward_func.func
    return bool(getattr(reward_func, "trl_ext_shaping", False)) or is_trl_overlong(reward_func)


def is_trl_overlong(reward_func: Callable) -> bool:
    # TRL keeps this name (a closure's, then a callable class's __name__) so that its metric keys do not change.
    return getattr(reward_func, "__name__", None) == "soft_overlong_punishment_reward"


def _weighted_sum(rewards_per_func: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return combine_rewards(rewards_per_func, weights.to(rewards_per_func.device))


class DynamicSamplingMixin:
    """Dynamic sampling for ``GRPOTrainer`` (see ``GRPOConfig.dynamic_sampling``); list it before
    ``CheckpointHooksMixin`` and ``GRPOHookMixin`` in the bases."""

    def _init_dynamic_sampling(self, train_dataset: Any) -> None:
        """Call in ``__init__`` once TRL's trainer exists: checks the setup and builds the state of the rounds."""
        self._filter_columns = None
        if self.args.dynamic_sampling:
            self._filter_columns = self._resolve_filter_columns()
            if train_dataset is not None and not (
                hasattr(train_dataset, "__getitem__") and hasattr(train_dataset, "__len__")
            ):
                raise ValueError(
                    "dynamic_sampling=True needs a map-style train_dataset (a datasets.Dataset) to draw refill prompts "
                    f"from, got {type(train_dataset).__name__}."
                )
            self._refuse_unsupported_generation()
        # Checkpointed, so that a resumed run makes the decisions of the uninterrupted one:
        self._refill = None
        self._refill_groups_drawn = 0  # this process's position in the refill sampler
        self._informative_rate = ds.RateEstimate()
        self._skipper = None
        if self.args.prompt_skipping == "greso":
            self._skipper = PromptSkipper(
                self.args.prompt_skipping_target_informative_rate,
                self.args.prompt_skipping_exploration,
                self.args.prompt_skipping_min_rollout,
                seed=self.args.seed,
            )

    def _refuse_unsupported_generation(self) -> None:
        unsupported = [
            name
            for name, value in (
                ("tools", self.tools),
                ("environment_factory", self.environment_factories),
                ("rollout_func", self.rollout_func),
            )
            if value
        ]
        if unsupported:
            raise ValueError(
                f"dynamic_sampling=True does not support {', '.join(unsupported)}: its rounds replay generated "
                "completions into TRL's step, which would run the tools or environments again. Set "
                "dynamic_sampling=False."
            )

    def _resolve_filter_columns(self) -> list[int]:
        names = self.args.dynamic_sampling_reward_funcs
        if names is None:
            columns = [i for i, func in enumerate(self.reward_funcs) if not is_shaping_reward(func)]
            if not columns:
                raise ValueError(
                    "dynamic_sampling=True needs a task reward as filter metric, but every reward function is a "
                    "shaping term; name the filter functions in dynamic_sampling_reward_funcs."
                )
            return columns
        unknown = [name for name in names if name not in self.reward_func_names]
        if unknown or not names:
            raise ValueError(
                f"dynamic_sampling_reward_funcs={names!r} names no reward function or unknown ones {unknown}; the "
                f"reward functions are {self.reward_func_names}."
            )
        return [i for i, name in enumerate(self.reward_func_names) if name in names]

    def _dynamic_sampling(self, inputs: list[dict]) -> tuple[dict, torch.Tensor]:
        """Generate and score rounds until all ranks together hold enough informative groups, then run TRL's step once
        on this rank's share of the pooled kept groups. Returns (this rank's batch, the gathered total reward of the kept batch, NaN for filled groups)."""
        if "image" in inputs[0] or "images" in inputs[0]:
            raise ValueError("dynamic_sampling=True does not support image prompts; set dynamic_sampling=False.")
        group_size, num_processes = self.num_generations, self.accelerator.num_processes
        needed = len(inputs) // group_size
        candidates = self._candidates(inputs)
        mark = self.metrics_mark()
        rounds, masks, sizes, skipped = [], [], [], 0
        with vllm_sleep_once(self):
            for _ in range(self.args.dynamic_sampling_max_rounds):
                missing = ds.missing_groups(masks, num_processes, needed)
                if missing == 0:
                    break
                size = ds.groups_per_rank(
                    ds.round_groups(
                        missing,
                        self._informative_rate.value,
                        num_processes * self._max_round_groups(needed, sizes),
                        self.args.dynamic_sampling_round_margin,
                    ),
                    num_processes,
                )
                groups, round_skipped = self._take_groups(candidates, size)
                skipped += round_skipped
                rows = [row for row in groups for _ in range(group_size)]
                rollout = self.generate_rollouts(rows)
                rewards_per_func = self.score_rollouts(rows, rollout)
                rounds.append(Round(rows, rollout, rewards_per_func, self.take_pending_extra_logs()))
                masks.append(self._informative(rewards_per_func))
                sizes.append(size)
                self._record_round(groups, masks[-1])
        self.discard_metrics_since(mark)  # the rounds' completion lengths: TRL logs the kept batch's below
        plan = ds.plan_batch(masks, num_processes, needed)
        self._log_dynamic_sampling(masks, plan, skipped)
        return self._trl_step_on_kept(rounds, plan, sizes)

    def _informative(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
        columns = self._filter_columns
        filter_metric = _weighted_sum(rewards_per_func[:, columns], self.reward_weights[columns])
        return informative_groups(filter_metric, self.num_generations).cpu()

    def _record_round(self, groups: list[dict], informative: torch.Tensor) -> None:
        self._informative_rate.update(int(informative.sum()), informative.numel())
        if self._skipper is not None:
            from accelerate.utils import gather_object

            keys = gather_object([prompt_key(row["prompt"]) for row in groups])
            self._skipper.record(keys, informative.tolist())

    def _max_round_groups(self, needed: int, sizes: list[int]) -> int:
        cap = self.args.dynamic_sampling_max_round_groups
        cap = max(needed, cap if cap is not None else 8 * needed)
        # A round at most 4× the previous one: a rate estimated from one small round (a cold start) is noisy, and
        # an underestimate would generate far more groups than needed.
        return min(cap, ds.MAX_ROUND_GROWTH * sizes[-1]) if sizes else cap

    def _candidates(self, inputs: list[dict]):
        """This rank's candidate prompts (one row per group): the step's own groups, then refill prompts."""
        yield from inputs[:: self.num_generations]
        columns = list(inputs[0].keys())
        while True:
            if self._refill is None:
                self._refill = ds.refill_groups(
                    len(self.train_dataset),
                    self.num_generations,
                    self.args.generation_batch_size,
                    self.accelerator.num_processes,
                    self.accelerator.process_index,
                    seed=self.args.seed + 1,
                )
                for _ in range(self._refill_groups_drawn):  # resumed: skip what the checkpointed run drew
                    next(self._refill)
            index = next(self._refill)
            self._refill_groups_drawn += 1
            row = self.train_dataset[index]
            yield {key: row[key] for key in columns}

    def _take_groups(self, candidates, size: int) -> tuple[list[dict], int]:
        """The next ``size`` candidates that prompt skipping lets through, and how many it skipped."""
        groups, skipped = [], 0
        while len(groups) < size:
            row = next(candidates)
            if self._skipper is not None and self._skipper.should_skip(
                prompt_key(row["prompt"]), self.state.global_step
            ):
                skipped += 1
            else:
                groups.append(row)
        return groups, skipped

    def _trl_step_on_kept(
        self, rounds: list[Round], plan: list[list[ds.GroupRef]], sizes: list[int]
    ) -> tuple[dict, torch.Tensor]:
        group_size, rank = self.num_generations, self.accelerator.process_index
        kept = self._exchange_groups(rounds, plan)
        local = [(j, i) for j in range(len(kept)) for i in range(group_size)]
        rows = [row for group in kept for row in group.rows]
        rollout = Rollout.of_rows([group.rollout for group in kept], local)
        gathered = ds.kept_gathered_rows(plan, sizes, group_size)
        offsets = [0]
        for generated in rounds:
            offsets.append(offsets[-1] + generated.rewards_per_func.shape[0])
        all_rewards = torch.cat([generated.rewards_per_func for generated in rounds])
        rewards_per_func = all_rewards[torch.tensor([offsets[k] + i for k, i in gathered], device=all_rewards.device)]
        self.set_pending_extra_logs(
            self._kept_extra_logs([group.extra_logs for group in kept], [group_size] * len(kept), local)
        )
        output = self.trl_step_on(rows, rollout, rewards_per_func)
        filled = torch.tensor([ref.filled for ref in plan[rank]], device=output["advantages"].device)
        any_filled = any(ref.filled for refs in plan for ref in refs)  # the plan is the same on every process
        self._leave_out_filled_rows(output, filled.repeat_interleave(group_size), any_filled)
        total = _weighted_sum(rewards_per_func, self.reward_weights)
        all_filled = torch.tensor([ref.filled for refs in plan for ref in refs], device=total.device)
        total = torch.where(all_filled.repeat_interleave(group_size), torch.nan, total)
        if self._skipper is not None:
            self._skipper.adjust()
        return output, total

    def _exchange_groups(self, rounds: list[Round], plan: list[list[ds.GroupRef]]) -> list[Round]:
        """This rank's kept groups, in plan order: its own from ``rounds``, the others' received whole from the ranks
        that generated them. Every rank reads the same plan, so all of them take part in the exchange or none does."""
        group_size, rank = self.num_generations, self.accelerator.process_index
        moves = [(dest, ref) for dest, refs in enumerate(plan) for ref in refs if ref.rank != dest]
        received = {}
        if moves:
            from accelerate.utils import gather_object

            outgoing = {
                (dest, ref): rounds[ref.round].group(rank, ref.group, group_size)
                for dest, ref in moves
                if ref.rank == rank
            }
            for sent in gather_object([outgoing]):
                received.update({ref: group for (dest, ref), group in sent.items() if dest == rank})
        return [
            received[ref] if ref.rank != rank else rounds[ref.round].group(rank, ref.group, group_size)
            for ref in plan[rank]
        ]

    def _leave_out_filled_rows(self, output: dict, filled_rows: torch.Tensor, any_filled: bool) -> None:
        """Uninformative groups kept because the rounds ran out get advantage 0 and take no part in the loss or in
        its token normaliser: DAPO's token-level loss averages over the tokens of informative groups only (§3.2-3.3;
        verl raises instead), so a filled group must not dilute their gradient through ``num_items_in_batch``."""
        shape = (-1, *[1] * (output["advantages"].dim() - 1))
        output["advantages"] = torch.where(filled_rows.view(shape), 0.0, output["advantages"])
        if not any_filled:
            return
        output["completion_mask"] = output["completion_mask"] * (~filled_rows).view(-1, 1).to(
            output["completion_mask"]
        )
        output["num_items_in_batch"] = self.accelerator.gather(output["completion_mask"].sum()).sum()

    @staticmethod
    def _kept_extra_logs(extras: list[dict], lengths: list[int], local: list[tuple[int, int]]) -> dict[str, list]:
        """The completions-table columns reward functions logged, for the kept rows only."""
        columns = sorted({column for extra in extras for column in extra})
        kept = {}
        for column in columns:
            values = [extra.get(column) or [None] * n for extra, n in zip(extras, lengths, strict=True)]
            kept[column] = [values[k][i] for k, i in local]
        return kept

    def _log_dynamic_sampling(self, masks: list[torch.Tensor], plan: list[list[ds.GroupRef]], skipped: int) -> None:
        filled = sum(ref.filled for refs in plan for ref in refs)
        generated = sum(mask.numel() for mask in masks)
        skipped = int(self.accelerator.gather(torch.tensor([skipped], device=self.accelerator.device)).sum())
        self.record_metric("dynamic_sampling/rounds", len(masks))
        self.record_metric("dynamic_sampling/generated_groups", generated)
        self.record_metric("dynamic_sampling/used_groups", sum(len(refs) for refs in plan) - filled)
        self.record_metric("dynamic_sampling/skipped_prompts", skipped)
        self.record_metric("dynamic_sampling/informative_fraction", float(torch.cat(masks).float().mean()))
        self.record_metric("dynamic_sampling/informative_rate_estimate", self._informative_rate.value)
        self.record_metric("dynamic_sampling/filled_uninformative", filled)
        if self._skipper is not None:
            self.record_metric("dynamic_sampling/exploration_probability", self._skipper.exploration)
        if not filled:
            return
        message = (
            f"dynamic_sampling: {filled} uninformative group(s) were kept after dynamic_sampling_max_rounds="
            f"{self.args.dynamic_sampling_max_rounds} rounds"
        )
        if self.args.dynamic_sampling_on_exhausted == "raise":
            raise RuntimeError(message + " (dynamic_sampling_on_exhausted='raise').")
        logger.warning(message + "; their advantage is set to 0.")

    def save_checkpoint_state(self, directory: str) -> None:
        super().save_checkpoint_state(directory)
        if not self.args.dynamic_sampling:
            return
        from accelerate.utils import gather_object

        drawn = gather_object([self._refill_groups_drawn])  # collective: every process is saving
        if self.args.should_save:
            state = {
                "refill_groups_drawn": drawn,
                "informative_rate": self._informative_rate.state_dict(),
                "prompt_skipping": None if self._skipper is None else self._skipper.state_dict(),
            }
            Path(directory, DYNAMIC_SAMPLING_STATE_FILE).write_text(json.dumps(state))

    def load_checkpoint_state(self, checkpoint: str) -> None:
        super().load_checkpoint_state(checkpoint)
        path = Path(checkpoint, DYNAMIC_SAMPLING_STATE_FILE)
        if path.exists():
            state = json.loads(path.read_text())
            self._refill_groups_drawn = state["refill_groups_drawn"][self.accelerator.process_index]
            self._informative_rate.load_state_dict(state["informative_rate"])
            if self._skipper is not None and state["prompt_skipping"] is not None:
                self._skipper.load_state_dict(state["prompt_skipping"])
        self._refill = None
