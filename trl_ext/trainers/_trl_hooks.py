"""TRL's GRPO hooks (generation, rewards, metrics, the dynamic-sampling replay), checkpoint uploads and kept dataset
columns: with the other ``trainers/_trl*`` modules, the only places in trl_ext that touch TRL's private methods and
attributes (tests/test_layout.py holds that).

trl_ext wraps TRL and never copies it: a trainer overrides one of the hooks below, calls ``super()`` and
post-processes the result. These hooks have kept their signatures since TRL 0.29.1; ``check_trl_hooks``
verifies that the installed TRL still has them, and the trainers call ``require_trl_hooks`` at import time
so that a TRL upgrade that changes one fails loudly instead of drifting silently.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from transformers import TrainerCallback

from trl_ext.trainers._trl_checkpoint import checkpoint_dir  # noqa: F401  (its old home)

# hook name -> the parameter names trl_ext relies on, in order (``self`` first).
GRPO_HOOKS: dict[str, tuple[str, ...]] = {
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_generate_and_score_completions": ("self", "inputs"),
    "_prepare_inputs": ("self", "generation_batch"),
    "compute_loss": ("self", "model", "inputs", "return_outputs", "num_items_in_batch"),
    "training_step": ("self", "model", "inputs", "num_items_in_batch"),
    "_save_checkpoint": ("self", "model", "trial"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
    # Dynamic sampling generates and scores rounds with TRL's own generation (``_generate``), then replays the kept
    # completions into one ``_generate_and_score_completions`` through its generation hook ``_generate_single_turn``.
    "_generate": ("self", "prompts"),
    "_generate_single_turn": ("self", "prompt_ids", "images", "multimodal_fields", "num_generations"),
}

# What the replay relies on inside TRL's methods (checked by the guard test): ``_generate`` returns this 8-tuple and
# generates through ``_generate_single_turn`` unless a rollout_func is set; a colocated vLLM engine with sleep mode
# sleeps after every ``generate`` and flags its discarded weights in ``_llm_weights_sleeping``.
GENERATE_OUTPUTS = (
    "prompt_ids",
    "completion_ids",
    "tool_mask",
    "completions",
    "logprobs",
    "extra_fields",
    "images",
    "tool_images",
)
GRPO_ATTRIBUTES = ("_metrics", "_logs", "_pending_extra_logs", "tools", "environment_factories", "rollout_func")

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


class Rollout(NamedTuple):
    """One round's generation for this process's rows, as TRL's ``_generate`` returns it."""

    prompts: list
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    completions: list
    logprobs: list | None

    @classmethod
    def of_rows(cls, rollouts: list[Rollout], rows: list[tuple[int, int]]) -> Rollout:
        """The rows ``(rollout index, row)`` of several rollouts, in order."""
        return cls(*(
            None if any(r[field] is None for r in rollouts) else [rollouts[k][field][i] for k, i in rows]
            for field in range(len(cls._fields))
        ))  # fmt: skip


@dataclass
class HookState:
    """Everything trl_ext hands to TRL's private hooks, or reads back from them, around one call of TRL's generation
    and scoring; one per trainer (``GRPOHookMixin.hook_state``).

    Dynamic sampling's replay: what TRL's next generation call (``_generate_single_turn``) and its next reward call
    (``_calculate_rewards``) return instead of generating and scoring again, each taken once. ``scored``: what TRL's
    reward call returned last (the gathered (P·B, F) rewards), read back by ``trl_generate_round``. ``vllm_rounds``:
    while a step's generation rounds run, the colocated vLLM engine kept awake between them."""

    replay_generation: tuple | None = None  # (prompt_ids, completion_ids, logprobs)
    replay_rewards: torch.Tensor | None = None  # the gathered (P·B, F) rewards of the kept rows
    scored: torch.Tensor | None = None
    vllm_rounds: _VLLMSleepDeferral | None = None

    def replay(self, generation: tuple, rewards: torch.Tensor) -> None:
        self.replay_generation, self.replay_rewards = generation, rewards

    @property
    def replaying(self) -> bool:
        return self.replay_generation is not None or self.replay_rewards is not None

    def take_generation(self) -> tuple | None:
        generation, self.replay_generation = self.replay_generation, None
        return generation

    def take_rewards(self) -> torch.Tensor | None:
        rewards, self.replay_rewards = self.replay_rewards, None
        return rewards


class GRPOHookMixin:
    """Routes the private hooks of ``trl.GRPOTrainer`` to trl_ext; list it before ``trl.GRPOTrainer`` in the bases.

    Contract relied on (TRL 1.16, stable since 0.29.1): ``_generate_and_score_completions(inputs)`` generates, scores
    and returns this process's rows, calling ``_calculate_rewards`` exactly once; ``_calculate_rewards`` returns the
    GATHERED (P·B, F) reward tensor (identical on every rank, rows in rank order, groups contiguous). Both calls
    contain collectives, so every rank must make them the same number of times. Two private attributes are read:
    ``_metrics[mode]`` (name -> list of floats, averaged by ``log``) and ``_logs["advantages"]`` (a deque of the
    gathered advantages of the last batch, shown in the completions table); tests exercise both.
    """

    @property
    def hook_state(self) -> HookState:
        """This trainer's ``HookState`` (made on first use)."""
        state = vars(self).get("_trl_ext_hook_state")
        if state is None:
            state = self._trl_ext_hook_state = HookState()
        return state

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = self.hook_state.take_rewards()
        if rewards_per_func is None:
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self.hook_state.scored = rewards_per_func
        return rewards_per_func

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs):
        replay = self.hook_state.take_generation()
        if replay is None:
            output = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs
            )
            if self.hook_state.vllm_rounds is not None:
                self.hook_state.vllm_rounds.after_generate()
            return output
        expected_prompt_ids, completion_ids, logprobs = replay
        if [list(ids) for ids in prompt_ids] != [list(ids) for ids in expected_prompt_ids]:
            raise RuntimeError(
                "dynamic_sampling replays kept completions into TRL's step, but TRL tokenized their prompts "
                "differently from the generation round; this TRL version is not supported."
            )
        return completion_ids, logprobs

    # --- generate and score without TRL's log-prob passes, then TRL's step once on the kept rows ------------------

    def generate_rollouts(self, inputs: list[dict]) -> Rollout:
        """TRL's generation alone (``_generate``): no log-prob pass and no reward; whole groups, contiguous."""
        prompts = [example["prompt"] for example in inputs]
        output = dict(zip(GENERATE_OUTPUTS, self._generate(prompts), strict=True))
        if output["tool_mask"] is not None or output["extra_fields"] or output["tool_images"]:
            raise RuntimeError("dynamic_sampling does not support tools, rollout_func or tool images.")
        return Rollout(
            prompts, output["prompt_ids"], output["completion_ids"], output["completions"], output["logprobs"]
        )

    def score_rollouts(self, inputs: list[dict], rollout: Rollout) -> torch.Tensor:
        """TRL's reward call on generated rows: the gathered (P·B, F) rewards, identical on every rank."""
        return self._calculate_rewards(inputs, rollout.prompts, rollout.completions, rollout.completion_ids)

    def trl_step_on(self, inputs: list[dict], rollout: Rollout, gathered_rewards: torch.Tensor) -> dict:
        """TRL's whole ``_generate_and_score_completions`` on rows already generated and scored: its generation hook
        returns ``rollout``'s completions and its reward hook ``gathered_rewards`` (the kept rows of every rank, in
        rank order), so the log-prob passes, advantages, metrics and completions table are TRL's, of these rows."""
        state = self.hook_state
        state.replay((rollout.prompt_ids, rollout.completion_ids, rollout.logprobs), gathered_rewards)
        seen = self.state.num_input_tokens_seen  # the rounds already counted these tokens
        try:
            output = self.trl_generate_round(inputs)[0]
        finally:
            unused = state.replaying
            state.take_generation(), state.take_rewards()
        if unused:
            raise RuntimeError(
                "TRL's _generate_and_score_completions no longer generates through _generate_single_turn and scores "
                "through _calculate_rewards; dynamic_sampling cannot replay its rounds into it."
            )
        self.state.num_input_tokens_seen = seen
        self._metrics["train"]["num_tokens"] = [seen]
        return output

    def metrics_mark(self) -> dict[str, int]:
        """The length of every training metric list now; see :meth:`discard_metrics_since`."""
        return {name: len(values) for name, values in self._metrics["train"].items()}

    def discard_metrics_since(self, mark: dict[str, int]) -> None:
        """Drop what TRL logged since ``mark`` (the generation rounds' completion lengths: not the trained batch)."""
        metrics = self._metrics["train"]
        for name in list(metrics):
            if name not in mark:
                del metrics[name]
            else:
                del metrics[name][mark[name] :]

    def take_pending_extra_logs(self) -> dict[str, list]:
        """The completions-table columns reward functions logged (``log_extra``) since the last call, cleared."""
        pending = {column: list(values) for column, values in self._pending_extra_logs.items()}
        self._pending_extra_logs.clear()
        return pending

    def set_pending_extra_logs(self, columns: dict[str, list]) -> None:
        self._pending_extra_logs = defaultdict(list, columns)

    def _generate_and_score_completions(self, inputs):
        return self.generate_and_score(inputs)

    def generate_and_score(self, inputs: list[dict]) -> dict:
        """What TRL's ``_generate_and_score_completions`` returns; trainers override this, not the private hook."""
        return self.trl_generate_round(inputs)[0]

    def trl_generate_round(self, inputs: list[dict]) -> tuple[dict, torch.Tensor]:
        """One call of TRL's generation and scoring: (its output for this rank, the gathered (P·B, F) rewards)."""
        state = self.hook_state
        state.scored = None
        output = super()._generate_and_score_completions(inputs)
        rewards_per_func, state.scored = state.scored, None
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


class _VLLMSleepDeferral:
    """Keeps a colocated vLLM engine in sleep mode awake between the generation rounds of one step.

    TRL 1.16 puts the engine to sleep at level 2 after every ``generate`` (the weights are discarded) and pushes the
    weights again before the next one; with several rounds per step that is one push per round. While this is
    active, the engine's ``sleep`` is deferred to the end of the rounds (and its ``wake_up`` skipped while it never
    slept), so a step's rounds push the weights at most once: when the step's first round syncs them.
    """

    def __init__(self, generation: Any):
        self.generation, self.llm = generation, generation.llm
        self.real_sleep, self.real_wake_up = self.llm.sleep, self.llm.wake_up
        self.deferred: tuple | None = None
        self.llm.sleep, self.llm.wake_up = self._sleep, self._wake_up

    def _sleep(self, *args, **kwargs) -> None:
        self.deferred = (args, kwargs)

    def _wake_up(self, *args, **kwargs):
        if self.deferred is None:  # really asleep (since the previous step): wake it
            return self.real_wake_up(*args, **kwargs)
        return None

    def after_generate(self) -> None:
        if self.deferred is not None:
            self.generation._llm_weights_sleeping = False  # the sleep that discards them did not happen

    def close(self) -> None:
        self.llm.sleep, self.llm.wake_up = self.real_sleep, self.real_wake_up
        if self.deferred is not None:
            self.real_sleep(*self.deferred[0], **self.deferred[1])
            self.generation._llm_weights_sleeping = True


@contextmanager
def vllm_sleep_once(trainer):
    """Around a step's generation rounds: a colocated vLLM engine with sleep mode sleeps once, after the last."""
    generation = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    if generation is None or generation.mode != "colocate" or not generation.enable_sleep_mode:
        yield
        return
    deferral = _VLLMSleepDeferral(generation)
    trainer.hook_state.vllm_rounds = deferral
    try:
        yield
    finally:
        trainer.hook_state.vllm_rounds = None
        deferral.close()


class SignatureColumnMixin:
    """Keeps one extra dataset column (``extra_signature_column``) that transformers' Trainer would drop: it keeps only
    the columns named in the model's forward signature (``_set_signature_columns_if_needed`` fills the private
    ``_signature_columns``)."""

    extra_signature_column: str

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if self.extra_signature_column not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, self.extra_signature_column]
