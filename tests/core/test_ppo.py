"""trl_ext.core.ppo against per-element plain-Python references written from the papers' formulas."""

import math
import threading

import pytest
import torch

from trl_ext.core.ppo import (
    adaptive_kl_coef,
    explained_variance,
    last_valid_index,
    token_rewards,
    value_clip_fraction,
)


def random_case(seed, rows=5, length=7):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, length, generator=generator, dtype=torch.float64)
    y = torch.randn(rows, length, generator=generator, dtype=torch.float64)
    lengths = torch.randint(0, length + 1, (rows,), generator=generator)
    lengths[0] = length  # at least one full row
    mask = (torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)).long()
    scores = torch.randn(rows, generator=generator, dtype=torch.float64)
    return x, y, mask, scores


def ref_token_rewards(scores, kl, mask, beta):
    out = []
    for s, kl_row, m_row in zip(scores, kl, mask):
        row = [-beta * k if m else 0.0 for k, m in zip(kl_row, m_row)]
        valid = [t for t, m in enumerate(m_row) if m]
        if valid:
            row[valid[-1]] += s
        out.append(row)
    return out


def ref_explained_variance(values, returns, mask):
    pairs = [(v, r) for v_row, r_row, m_row in zip(values, returns, mask) for v, r, m in zip(v_row, r_row, m_row) if m]
    n = len(pairs)
    mean_r = sum(r for _, r in pairs) / n
    residuals = [r - v for v, r in pairs]
    mean_res = sum(residuals) / n
    var_r = sum((r - mean_r) ** 2 for _, r in pairs) / n
    var_res = sum((e - mean_res) ** 2 for e in residuals) / n
    return 1 - var_res / var_r


def ref_clip_fraction(values, old, returns, mask, c):
    picked = total = 0
    for v_row, o_row, r_row, m_row in zip(values, old, returns, mask):
        for v, o, r, m in zip(v_row, o_row, r_row, m_row):
            if not m:
                continue
            total += 1
            clipped = min(max(v, o - c), o + c)
            picked += abs(v - o) > c and (clipped - r) ** 2 > (v - r) ** 2
    return picked / total


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("beta", [0.0, 0.05, 1.0])
def test_token_rewards_matches_reference(seed, beta):
    kl, _, mask, scores = random_case(seed)
    actual = token_rewards(scores, kl, mask, beta)
    expected = ref_token_rewards(scores.tolist(), kl.tolist(), mask.tolist(), beta)
    assert torch.allclose(actual, torch.tensor(expected, dtype=torch.float64), atol=1e-12)


def test_token_rewards_score_on_last_valid_token_with_gap():
    mask = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0]])
    rewards = token_rewards(torch.tensor([2.0, 5.0]), torch.ones(2, 4), mask, 0.5)
    assert rewards.tolist() == [[-0.5, 0.0, 1.5, 0.0], [0.0, 0.0, 0.0, 0.0]]
    assert last_valid_index(mask).tolist() == [2, -1]


def test_token_rewards_errors_name_the_argument():
    with pytest.raises(ValueError, match="scores"):
        token_rewards(torch.zeros(3), torch.zeros(2, 4), torch.ones(2, 4), 0.1)
    with pytest.raises(ValueError, match="kl_coef"):
        token_rewards(torch.zeros(2), torch.zeros(2, 4), torch.ones(2, 4), -0.1)


@pytest.mark.parametrize(
    ("kl", "target", "expected_error"), [(3.0, 6.0, -0.2), (6.6, 6.0, 0.1), (100.0, 6.0, 0.2), (6.0, 6.0, 0.0)]
)
def test_adaptive_kl_coef_matches_ziegler(kl, target, expected_error):
    # β ← β·(1 + clip(KL/target − 1, −0.2, 0.2)·n/horizon)
    assert adaptive_kl_coef(0.1, kl, target, horizon=10000, n_steps=256) == pytest.approx(
        0.1 * (1 + expected_error * 256 / 10000), rel=1e-12
    )
    with pytest.raises(ValueError, match="target"):
        adaptive_kl_coef(0.1, kl, 0.0, horizon=10, n_steps=1)


@pytest.mark.parametrize("seed", range(4))
def test_explained_variance_matches_reference(seed):
    values, returns, mask, _ = random_case(seed)
    actual = explained_variance(values, returns, mask)
    assert actual.item() == pytest.approx(ref_explained_variance(values.tolist(), returns.tolist(), mask.tolist()))


def test_explained_variance_perfect_constant_and_undefined():
    returns = torch.tensor([[1.0, 2.0, 3.0, 9.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    assert explained_variance(returns, returns, mask).item() == pytest.approx(1.0)
    assert explained_variance(torch.full_like(returns, 2.0), returns, mask).item() == pytest.approx(0.0)
    assert math.isnan(explained_variance(returns, torch.ones_like(returns), torch.tensor([[1, 0, 0, 0]])).item())


def test_explained_variance_global_through_all_reduce():
    """Two "processes" with different T get the value of their union, exchanging sums only."""
    values, returns, mask, _ = random_case(7, rows=6)
    shards = [(values[:3], returns[:3], mask[:3]), (values[3:, :4], returns[3:, :4], mask[3:, :4])]
    pairs = [(s[0].tolist(), s[1].tolist(), s[2].tolist()) for s in shards]
    expected = ref_explained_variance(pairs[0][0] + pairs[1][0], pairs[0][1] + pairs[1][1], pairs[0][2] + pairs[1][2])
    barrier, slots, outputs = threading.Barrier(2), [None, None], [None, None]

    def run(rank):
        def all_reduce_sum(tensor):
            slots[rank] = tensor.clone()
            barrier.wait()
            total = slots[0] + slots[1]
            barrier.wait()
            return total

        outputs[rank] = explained_variance(*shards[rank], all_reduce_sum=all_reduce_sum).item()

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert outputs[0] == pytest.approx(expected) and outputs[1] == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("clip_range", [0.05, 0.5])
def test_value_clip_fraction_matches_reference(seed, clip_range):
    values, old, mask, _ = random_case(seed)
    returns = torch.randn(values.shape, generator=torch.Generator().manual_seed(seed + 10), dtype=torch.float64)
    actual = value_clip_fraction(values, old, returns, mask, clip_range)
    expected = ref_clip_fraction(values.tolist(), old.tolist(), returns.tolist(), mask.tolist(), clip_range)
    assert actual.item() == pytest.approx(expected)
