"""The reference-reset fields of a trainer's Config (ProRL, arXiv 2505.24864 §2.3.1)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReferenceResetArguments:
    """Reference-reset knobs shared by every trl_ext trainer that has a reference model."""

    ref_reset_steps: int | None = field(
        default=None,
        metadata={"help": "Hard-reset the reference to the policy every this many optimizer steps. None: never."},
    )
    ref_reset_metric: str | None = field(
        default=None,
        metadata={
            "help": "Eval metric watched for a plateau (e.g. 'reward'; the 'eval_' prefix is optional). The "
            "reference is reset when it has not improved for `ref_reset_patience` evaluations. None: off."
        },
    )
    ref_reset_metric_mode: str = field(
        default="max", metadata={"help": "'max' if a larger `ref_reset_metric` is better, 'min' otherwise."}
    )
    ref_reset_patience: int = field(
        default=1, metadata={"help": "Evaluations without improvement before a plateau reset."}
    )
    ref_reset_min_delta: float = field(
        default=0.0, metadata={"help": "The smallest change of `ref_reset_metric` that counts as an improvement."}
    )
    ref_reset_kl_threshold: float | None = field(
        default=None,
        metadata={"help": "Reset when the mean KL to the reference over a logging window exceeds this. None: off."},
    )
    reset_optimizer: bool = field(
        default=True,
        metadata={
            "help": "Re-initialise the optimizer state in place at each reset (ProRL); the LR schedule goes on."
        },
    )

    @property
    def reference_resets_enabled(self) -> bool:
        return any(
            value is not None for value in (self.ref_reset_steps, self.ref_reset_metric, self.ref_reset_kl_threshold)
        )

    def validate_reference_resets(self) -> None:
        if self.ref_reset_steps is not None and self.ref_reset_steps <= 0:
            raise ValueError(
                f"`ref_reset_steps` must be a positive number of steps or None, got {self.ref_reset_steps}."
            )
        if self.ref_reset_metric_mode not in ("max", "min"):
            raise ValueError(f"`ref_reset_metric_mode` must be 'max' or 'min', got {self.ref_reset_metric_mode!r}.")
        if self.ref_reset_patience < 1:
            raise ValueError(f"`ref_reset_patience` must be >= 1, got {self.ref_reset_patience}.")
        if self.ref_reset_kl_threshold is not None and self.ref_reset_kl_threshold <= 0:
            raise ValueError(f"`ref_reset_kl_threshold` must be > 0 or None, got {self.ref_reset_kl_threshold}.")
        if self.ref_reset_metric is not None and getattr(self, "eval_strategy", "no") == "no":
            raise ValueError(
                f"`ref_reset_metric`={self.ref_reset_metric!r} resets the reference on a plateau of an evaluation "
                "metric, but `eval_strategy` is 'no': nothing is ever evaluated, so it could never fire. Set "
                "`eval_strategy` ('steps' with `eval_steps`, or 'epoch') and pass an eval dataset, or use "
                "`ref_reset_steps` / `ref_reset_kl_threshold` instead."
            )
