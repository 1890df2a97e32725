"""Per-element plain-Python references for trl_ext.core.preference, written from the papers' formulas.

Deliberately independent of trl_ext.core: floats, loops and the `math` module only.
"""

from __future__ import annotations

import math


def log_sigmoid(x):
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def dpo_margin_loss(delta, margin, beta, loss_type, label_smoothing=0.0):
    """ODPO / SLiC hinge / robust DPO at the logit beta*delta - margin, for one pair."""
    z = beta * delta - margin
    if loss_type == "sigmoid":
        return -log_sigmoid(z)
    if loss_type == "hinge":
        return max(0.0, 1.0 - z)
    eps = label_smoothing
    return (-(1 - eps) * log_sigmoid(z) + eps * log_sigmoid(-z)) / (1 - 2 * eps)


def bradley_terry_loss(chosen, rejected, margin=None, weight=None, center=None):
    n = len(chosen)
    margin = margin or [0.0] * n
    weight = weight or [1.0] * n
    total = 0.0
    for rw, rl, m, w in zip(chosen, rejected, margin, weight):
        term = -log_sigmoid(rw - rl - m)
        if center is not None:
            term += center * (rw + rl) ** 2
        total += w * term
    return total / n


def combine_rewards(per_func, weights):
    """per_func: rows of per-function rewards, None where a function declined."""
    out = []
    for row in per_func:
        scored = [w * r for r, w in zip(row, weights) if r is not None]
        out.append(sum(scored) if scored else math.nan)
    return out


def listwise_pairs(scores):
    """All (better, worse) index pairs of one scored list, ties excluded, each weighted 1/#pairs."""
    pairs = [(i, j) for i in range(len(scores)) for j in range(len(scores)) if scores[i] > scores[j]]
    return [(i, j, 1.0 / len(pairs)) for i, j in pairs]
