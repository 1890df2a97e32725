"""The built-in offline tasks of `trl-ext compare` and the claims bench.

``demo``: the offline demo's single-digit sums (every problem trained on, accuracy measured on all of them).

``mixed``: a task whose share of uninformative prompt groups is set by construction. Three kinds of prompt:

- learnable: ``a+b`` (operands 0-4) with a verifiable gold, scored by the recipe's math reward; a deterministic
  third of the 25 problems (``heldout_every``) is never trained on and is where accuracy is measured;
- too easy (``easy a+b``): always rewarded, whatever the completion (the reward's correct value);
- too hard (``hard a+b``): never rewarded (the reward's wrong value).

A group of too-easy or too-hard prompts has zero reward variance, so it carries no policy-gradient signal: with
``easy_share=0.4, hard_share=0.4`` about 80% of the groups are uninformative before the learnable ones are counted.
Held-out accuracy is the share of correct samples on the held-out problems, drawn at a fixed evaluation seed (the
same for every recipe, variant and training seed), so two runs are compared on the same draws of randomness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KINDS = ("learnable", "easy", "hard")
TASKS = ("demo", "mixed")
EVAL_SEED = 20_251_124  # every held-out measurement draws its samples from this seed
MAX_OPERAND = 4


@dataclass(frozen=True)
class TaskSpec:
    """One task of the family: its name and, for ``mixed``, the shares of too-easy and too-hard prompts."""

    name: str = "demo"
    easy_share: float = 0.4
    hard_share: float = 0.4
    heldout_every: int = 3  # problem i (of the 25, a-major) is held out when i % heldout_every == 0
    repeats: int = 16  # copies of each trained learnable problem in the dataset
    eval_samples: int = 32  # samples per held-out problem

    def check(self) -> None:
        """A ValueError naming the field for a task that cannot be built."""
        if self.name not in TASKS:
            raise ValueError(f"task: {self.name!r} is not a task; choose from {', '.join(TASKS)}.")
        for field_name in ("easy_share", "hard_share"):
            if not 0.0 <= getattr(self, field_name) < 1.0:
                raise ValueError(f"{field_name} is a share of the prompts in [0, 1), got {getattr(self, field_name)}.")
        if self.easy_share + self.hard_share >= 1.0:
            raise ValueError(
                f"easy_share + hard_share must leave room for learnable prompts (< 1), got "
                f"{self.easy_share} + {self.hard_share}."
            )
        for field_name in ("heldout_every", "repeats", "eval_samples"):
            if getattr(self, field_name) < (2 if field_name == "heldout_every" else 1):
                raise ValueError(f"{field_name} must be >= {2 if field_name == 'heldout_every' else 1}.")


def problems() -> list[tuple[int, int]]:
    return [(a, b) for a in range(MAX_OPERAND + 1) for b in range(MAX_OPERAND + 1)]


def split_problems(heldout_every: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(trained, held-out) learnable problems: problem i is held out when i % heldout_every == 0."""
    every = list(enumerate(problems()))
    return [p for i, p in every if i % heldout_every], [p for i, p in every if i % heldout_every == 0]


def _row(a: int, b: int, kind: str) -> dict[str, Any]:
    content = f"{a}+{b}" if kind == "learnable" else f"{kind} {a}+{b}"
    return {"prompt": [{"role": "user", "content": content}], "solution": f"\\boxed{{{a + b}}}", "difficulty": kind}


def kind_counts(spec: TaskSpec, learnable_rows: int) -> dict[str, int]:
    """Rows of each kind for ``learnable_rows`` learnable rows, so that the kinds have the spec's shares."""
    learnable_share = 1.0 - spec.easy_share - spec.hard_share
    return {
        "learnable": learnable_rows,
        "easy": round(learnable_rows * spec.easy_share / learnable_share),
        "hard": round(learnable_rows * spec.hard_share / learnable_share),
    }


def mixed_prompts(spec: TaskSpec) -> Any:
    """The mixed task's training prompts: the trained learnable problems ``repeats`` times, and too-easy / too-hard
    prompts in the spec's shares (their operands cycle through the 25 problems). Columns prompt, solution,
    difficulty."""
    from datasets import Dataset

    trained, _ = split_problems(spec.heldout_every)
    counts = kind_counts(spec, len(trained) * spec.repeats)
    rows = [_row(a, b, "learnable") for _ in range(spec.repeats) for a, b in trained]
    every = problems()
    for kind in ("easy", "hard"):
        rows += [_row(*every[i % len(every)], kind) for i in range(counts[kind])]
    return Dataset.from_list(rows)


def task_dataset(spec: TaskSpec) -> Any:
    """The training prompts of a task: the demo's 25 sums 64 times, or the mixed task's prompts."""
    if spec.name == "demo":
        from trl_ext.data.demo import arithmetic_prompts

        return arithmetic_prompts(repeats=64)
    return mixed_prompts(spec)


def heldout_prompts(spec: TaskSpec) -> Any:
    """The held-out learnable problems (never trained on in the mixed task); all 25 problems for ``demo``."""
    from datasets import Dataset

    if spec.name == "demo":
        from trl_ext.data.demo import arithmetic_prompts

        return arithmetic_prompts()
    _, heldout = split_problems(spec.heldout_every)
    return Dataset.from_list([_row(a, b, "learnable") for a, b in heldout])


class MixedTaskReward:
    """The recipe's math reward on learnable rows; its correct value on too-easy rows and its wrong value on too-hard
    rows, whatever the completion. Only learnable rows reach the math reward, so its logged accuracy counts them
    alone."""

    def __init__(self, reward: Any):
        self.reward = reward
        self.__name__ = getattr(reward, "__name__", type(reward).__name__)
        self.correct_value = getattr(reward, "correct_value", 1.0)
        self.wrong_value = getattr(reward, "wrong_value", 0.0)

    def __call__(self, *args: Any, completions: list, difficulty: list[str] | None = None, **kwargs: Any) -> list:
        if difficulty is None:
            raise ValueError("The mixed task's reward needs the dataset's `difficulty` column (learnable/easy/hard).")
        unknown = sorted({kind for kind in difficulty if kind not in KINDS})
        if unknown:
            raise ValueError(f"difficulty: unknown kind(s) {unknown}; each row is one of {', '.join(KINDS)}.")
        learnable = [i for i, kind in enumerate(difficulty) if kind == "learnable"]
        scores: list = [self.correct_value if kind == "easy" else self.wrong_value for kind in difficulty]
        if learnable:
            picked = {key: _pick(value, learnable, len(completions)) for key, value in kwargs.items()}
            learnt = self.reward(*args, completions=[completions[i] for i in learnable], **picked)
            for i, score in zip(learnable, learnt, strict=True):
                scores[i] = score
        return scores


def _pick(value: Any, rows: list[int], total: int) -> Any:
    """A per-row column restricted to ``rows``; anything else (trainer state, log_metric) unchanged."""
    if isinstance(value, list) and len(value) == total:
        return [value[i] for i in rows]
    return value


def task_reward_for(spec: TaskSpec, reward: Any) -> Any:
    """The reward a recipe trains with on the task: its math reward, wrapped for the mixed task."""
    return MixedTaskReward(reward) if spec.name == "mixed" else reward


def heldout_accuracy(model: Any, tokenizer: Any, spec: TaskSpec, max_new_tokens: int = 8) -> float:
    """Share of correct samples on the held-out problems (1 / 0 reward), sampled at the fixed evaluation seed."""
    import torch

    from trl_ext.evaluation import evaluate_policy
    from trl_ext.rewards import math_accuracy

    with torch.random.fork_rng():  # CPU and CUDA states restored: training does not depend on whether we measured
        torch.manual_seed(EVAL_SEED)
        report = evaluate_policy(model, tokenizer, heldout_prompts(spec), [math_accuracy],
                                 num_samples=spec.eval_samples, max_new_tokens=max_new_tokens,
                                 batch_size=128)  # fmt: skip
    return report.mean_reward


def heldout_recorder(spec: TaskSpec, every: int, counter: list[int], records: list[dict]) -> Any:
    """A callback recording held-out accuracy before training and every ``every`` optimizer steps:
    ``{"step", "samples", "heldout_accuracy"}`` (samples: completions generated so far, refill rounds included)."""
    from transformers import TrainerCallback

    class HeldoutRecorder(TrainerCallback):
        def _record(self, state: Any, model: Any, tokenizer: Any) -> None:
            was_training = model.training
            accuracy = heldout_accuracy(model, tokenizer, spec)
            model.train(was_training)
            records.append({"step": state.global_step, "samples": counter[0], "heldout_accuracy": accuracy})

        def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
            self._record(state, model, processing_class)

        def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
            if state.global_step % every == 0:
                self._record(state, model, processing_class)

    return HeldoutRecorder()
