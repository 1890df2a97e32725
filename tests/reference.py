"""Straightforward per-element references written from the papers' formulas, in plain Python.

Deliberately independent of trl_ext.core: lists, loops and the `math` module only. NaN marks a missing reward.
"""

from __future__ import annotations

import math

EPS = 1e-4


def _valid(xs):
    return [x for x in xs if not math.isnan(x)]


def mean(xs):
    return sum(xs) / len(xs)


def sample_std(xs):
    """Bessel-corrected sample std."""
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def groups(rewards, group_size):
    return [rewards[i : i + group_size] for i in range(0, len(rewards), group_size)]


def grpo_advantages(rewards, group_size, scale="group"):
    out = []
    for group in groups(rewards, group_size):
        valid = _valid(group)
        for r in group:
            if math.isnan(r):
                out.append(0.0)
            elif scale == "none":
                out.append(r - mean(valid))
            elif len(valid) < 2:
                out.append(0.0)
            else:
                out.append((r - mean(valid)) / (sample_std(valid) + EPS))
    return out


def rloo_advantages(rewards, group_size):
    out = []
    for group in groups(rewards, group_size):
        for i, r in enumerate(group):
            others = [x for j, x in enumerate(group) if j != i and not math.isnan(x)]
            out.append(0.0 if math.isnan(r) or not others else r - mean(others))
    return out


def magistral_advantages(rewards, group_size, minibatch_size):
    centred = []
    for group in groups(rewards, group_size):
        valid = _valid(group)
        centred += [math.nan if math.isnan(r) else r - mean(valid) for r in group]
    out = []
    for block in groups(centred, minibatch_size):
        valid = _valid(block)
        for a in block:
            if math.isnan(a) or len(valid) < 2:
                out.append(0.0)
            else:
                out.append((a - mean(valid)) / (sample_std(valid) + EPS))
    return out


def gae_row(rewards, values, mask, gamma, lam):
    """GAE on one row, walking the valid positions only (Schulman et al. 2016 Eq. 16)."""
    positions = [t for t, m in enumerate(mask) if m]
    advantages = [0.0] * len(rewards)
    for k in range(len(positions)):
        total = 0.0
        for l, t in enumerate(positions[k:]):
            next_value = values[positions[k + l + 1]] if k + l + 1 < len(positions) else 0.0
            delta = rewards[t] + gamma * next_value - values[t]
            total += (gamma * lam) ** l * delta
        advantages[positions[k]] = total
    returns = [advantages[t] + values[t] if mask[t] else 0.0 for t in range(len(rewards))]
    return advantages, returns


def whiten(values, mask):
    """values, mask: lists of rows."""
    flat = [v for row, mrow in zip(values, mask) for v, m in zip(row, mrow) if m]
    m, s2 = mean(flat), sample_std(flat) ** 2
    return [
        [(v - m) / math.sqrt(s2 + 1e-8) if mm else 0.0 for v, mm in zip(row, mrow)] for row, mrow in zip(values, mask)
    ]


def kl(logp, ref_logp, kind):
    if kind == "k1":
        return logp - ref_logp
    if kind == "k2":
        return 0.5 * (logp - ref_logp) ** 2
    ratio = math.exp(ref_logp - logp)  # π_ref / π_θ
    return ratio - math.log(ratio) - 1


def surrogate(logp, old_logp, advantage, eps_low, eps_high, dual_clip=None):
    ratio = math.exp(logp - old_logp)
    clipped_ratio = min(max(ratio, 1 - eps_low), 1 + eps_high)
    objective = min(ratio * advantage, clipped_ratio * advantage)  # PPO's pessimistic bound, to maximise
    if dual_clip is not None and advantage < 0:
        objective = max(objective, dual_clip * advantage)
    return -objective


def aggregate(loss, mask, mode, max_tokens=None):
    if mode == "token_mean":
        num = sum(l for row, mrow in zip(loss, mask) for l, m in zip(row, mrow) if m)
        den = sum(m for mrow in mask for m in mrow)
        return num / max(den, 1)
    per_seq = []
    for row, mrow in zip(loss, mask):
        total = sum(l for l, m in zip(row, mrow) if m)
        count = sum(mrow)
        per_seq.append(total / max(count, 1) if mode == "seq_mean_token_mean" else total / max_tokens)
    return mean(per_seq)


def value_loss(values, old_values, returns, mask, clip):
    losses = []
    for v, vo, r, m in zip(values, old_values, returns, mask):
        if m:
            v_clipped = min(max(v, vo - clip), vo + clip)
            losses.append(0.5 * max((v - r) ** 2, (v_clipped - r) ** 2))
    return mean(losses)


def overlong(length, max_length, cache_length, max_penalty=1.0):
    if length <= max_length - cache_length:
        return 0.0
    if length <= max_length:
        return max_penalty * ((max_length - cache_length) - length) / cache_length
    return -max_penalty


def informative(group):
    valid = _valid(group)
    return len(valid) >= 2 and sample_std(valid) > 0
