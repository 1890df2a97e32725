"""Training callbacks: the ProRL reference-reset triggers (arXiv 2505.24864 §2.3.1, §3.3)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field

from transformers import TrainerCallback

RESET_STATE_FILE = "trl_ext_resets.json"


@dataclass
class ResetBookkeeping:
    """What the reset triggers remember; saved with every checkpoint so that resume is exact."""

    resets: int = 0
    last_reset_step: int = 0
    reset_steps: list[int] = field(default_factory=list)
    reset_reasons: list[str] = field(default_factory=list)
    best_metric: float | None = None
    evaluations_without_improvement: int = 0

    def record(self, step: int, reason: str) -> None:
        self.resets += 1
        self.last_reset_step = step
        self.reset_steps.append(step)
        self.reset_reasons.append(reason)
        self.evaluations_without_improvement = 0

    def save(self, directory: str) -> None:
        with open(os.path.join(directory, RESET_STATE_FILE), "w") as handle:
            json.dump(asdict(self), handle, indent=2)

    @classmethod
    def load(cls, directory: str) -> ResetBookkeeping | None:
        path = os.path.join(directory, RESET_STATE_FILE)
        if not os.path.exists(path):
            return None
        with open(path) as handle:
            return cls(**json.load(handle))


class ReferenceResetCallback(TrainerCallback):
    """Fires ``trainer.reset_reference(reason)`` on the configured triggers.

    - interval: ``ref_reset_steps`` optimizer steps after the previous reset (or the start);
    - plateau: the eval metric ``ref_reset_metric`` has not improved by more than ``ref_reset_min_delta`` for
      ``ref_reset_patience`` evaluations ("when validation performance stagnates or degrades", ProRL §3.3);
    - kl: the mean KL of a logging window exceeds ``ref_reset_kl_threshold``.
    """

    def __init__(self, trainer):
        self.trainer = trainer

    @property
    def _book(self) -> ResetBookkeeping:
        return self.trainer.reset_bookkeeping

    def on_step_end(self, args, state, control, **kwargs):
        every = args.ref_reset_steps
        if every and state.global_step - self._book.last_reset_step >= every:
            self.trainer.reset_reference(reason="interval")

    def on_log(self, args, state, control, logs=None, **kwargs):
        threshold = args.ref_reset_kl_threshold
        kl = (logs or {}).get("kl")
        if threshold is None or kl is None or math.isnan(kl) or kl <= threshold:
            return
        if self._book.last_reset_step != state.global_step:  # not twice in one step (interval + kl)
            self.trainer.reset_reference(reason=f"kl {kl:.4g} > {threshold:g}")

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if args.ref_reset_metric is None:
            return
        value = self._metric_value(args.ref_reset_metric, metrics or {})
        book, sign = self._book, 1.0 if args.ref_reset_metric_mode == "max" else -1.0
        if book.best_metric is None or sign * (value - book.best_metric) > args.ref_reset_min_delta:
            book.best_metric = value
            book.evaluations_without_improvement = 0
            return
        book.evaluations_without_improvement += 1
        if book.evaluations_without_improvement >= args.ref_reset_patience:
            self.trainer.reset_reference(reason=f"plateau of {args.ref_reset_metric}")

    @staticmethod
    def _metric_value(name: str, metrics: dict[str, float]) -> float:
        for key in (name, f"eval_{name}"):
            if key in metrics:
                return float(metrics[key])
        raise ValueError(
            f"`ref_reset_metric`={name!r} is not among the evaluation metrics; they are: "
            f"{', '.join(sorted(metrics))}. Set `ref_reset_metric` to one of them."
        )
