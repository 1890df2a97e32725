"""When two variants' results over seeds count as different: the separation rule of the comparison and the claims
bench.

Two variants A (the one a paper favours, or a recipe) and B (the other, or GRPO) are run with the same seeds; the
measure is paired by seed. The difference **separates** when both hold:

1. A is better than B in at least ``ceil(0.8 · n)`` of the n seeds (4 of 5, 5 of 6, 8 of 10), and
2. the means are further apart than the larger of the two standard deviations over seeds.

When neither direction meets the rule the verdict is "does not separate", whatever the means say: at toy scale a
difference of means inside the seed spread is not evidence of anything.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

WIN_SHARE = 0.8
RULE = (
    "separates when the favoured variant is better in at least 80% of the seeds (4 of 5) AND the means are further "
    "apart than the larger standard deviation over seeds"
)


@dataclass(frozen=True)
class Separation:
    """The rule applied to two paired lists of per-seed values."""

    wins: int  # seeds where A is better than B
    losses: int  # seeds where B is better than A
    seeds: int
    mean_a: float
    mean_b: float
    std_a: float
    std_b: float
    verdict: str  # "separates", "separates in reverse", "does not separate"

    @property
    def difference(self) -> float:
        return self.mean_a - self.mean_b


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def separate(a: list[float], b: list[float], higher_is_better: bool = True) -> Separation:
    """The separation rule on per-seed values of A and B (same seeds, same order); a ValueError for lists of
    different lengths, fewer than 2 seeds or a NaN value."""
    if len(a) != len(b):
        raise ValueError(f"separate: the variants need the same seeds, got {len(a)} and {len(b)} values.")
    if len(a) < 2:
        raise ValueError(f"separate: at least 2 seeds are needed to compare spreads, got {len(a)}.")
    if any(math.isnan(x) for x in (*a, *b)):
        raise ValueError("separate: a per-seed value is NaN; measure every seed of both variants.")
    sign = 1.0 if higher_is_better else -1.0
    wins = sum(sign * (x - y) > 0 for x, y in zip(a, b, strict=True))
    losses = sum(sign * (y - x) > 0 for x, y in zip(a, b, strict=True))
    (mean_a, std_a), (mean_b, std_b) = _mean_std(a), _mean_std(b)
    needed = math.ceil(WIN_SHARE * len(a) - 1e-9)
    apart = abs(mean_a - mean_b) > max(std_a, std_b)
    if wins >= needed and apart and sign * (mean_a - mean_b) > 0:
        verdict = "separates"
    elif losses >= needed and apart and sign * (mean_b - mean_a) > 0:
        verdict = "separates in reverse"
    else:
        verdict = "does not separate"
    return Separation(wins, losses, len(a), mean_a, mean_b, std_a, std_b, verdict)


def versus(runs: list[dict], recipe: str, baseline: str) -> Separation | None:
    """The separation rule on final held-out accuracy, recipe against baseline, paired by seed (None when the runs
    have no final accuracy or fewer than 2 common seeds)."""
    final = {(r["recipe"], r["seed"]): r.get("final_accuracy") for r in runs}
    seeds = sorted(s for (name, s), v in final.items() if name == recipe and final.get((baseline, s)) is not None)
    if len(seeds) < 2 or any(final[(recipe, s)] is None for s in seeds):
        return None
    return separate([final[(recipe, s)] for s in seeds], [final[(baseline, s)] for s in seeds])
