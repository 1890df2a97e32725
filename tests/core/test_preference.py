"""trl_ext.core.preference against the per-element references of tests/reference_preference.py."""

from __future__ import annotations

import math

import pytest
import torch

from tests import reference_preference as ref
from trl_ext.core.preference import (
    bradley_terry_loss,
    combine_rewards,
    dpo_margin_loss,
    listwise_pair_weight,
    margin_as_logratio_offset,
)

DELTAS = [-3.0, -0.4, 0.0, 0.7, 2.5, 12.0]
MARGINS = [0.0, 0.5, -1.0, 2.0, 0.3, 1.5]


@pytest.mark.parametrize("loss_type,smoothing", [("sigmoid", 0.0), ("hinge", 0.0), ("robust", 0.2)])
@pytest.mark.parametrize("beta", [0.1, 0.5, 2.0])
def test_dpo_margin_loss_matches_reference(loss_type, smoothing, beta):
    got = dpo_margin_loss(
        torch.tensor(DELTAS, dtype=torch.float64),
        torch.tensor(MARGINS, dtype=torch.float64),
        beta,
        loss_type,
        smoothing,
    )
    want = [ref.dpo_margin_loss(d, m, beta, loss_type, smoothing) for d, m in zip(DELTAS, MARGINS)]
    assert got.tolist() == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_margin_offset_shifts_the_logit_by_the_margin():
    margin, beta, delta = torch.tensor([0.5, -2.0]), 0.25, torch.tensor([1.0, 3.0])
    shifted = beta * (delta - margin_as_logratio_offset(margin, beta))
    assert torch.allclose(shifted, beta * delta - margin)
    with pytest.raises(ValueError, match="beta"):
        margin_as_logratio_offset(margin, 0.0)


def test_dpo_margin_loss_rejects_undefined_loss_types():
    with pytest.raises(ValueError, match="ipo"):
        dpo_margin_loss(torch.zeros(2), torch.zeros(2), 0.1, "ipo")


@pytest.mark.parametrize(
    "with_margin,with_weight,center", [(False, False, None), (True, True, 0.01), (True, False, None)]
)
def test_bradley_terry_loss_matches_reference(with_margin, with_weight, center):
    chosen, rejected = [1.0, -0.5, 2.0, 0.1], [0.0, 0.5, -1.0, 0.1]
    margin = [0.5, 0.0, 1.0, 2.0] if with_margin else None
    weight = [1 / 6, 1 / 6, 1.0, 0.5] if with_weight else None
    as_tensor = lambda xs: None if xs is None else torch.tensor(xs, dtype=torch.float64)  # noqa: E731
    got = bradley_terry_loss(as_tensor(chosen), as_tensor(rejected), as_tensor(margin), as_tensor(weight), center)
    assert got.item() == pytest.approx(ref.bradley_terry_loss(chosen, rejected, margin, weight, center), rel=1e-12)


def test_combine_rewards_nan_when_every_function_declines():
    per_func = [[1.0, None], [None, None], [0.5, 2.0]]
    weights = [1.0, 0.5]
    tensor = torch.tensor([[math.nan if r is None else r for r in row] for row in per_func])
    got = combine_rewards(tensor, torch.tensor(weights)).tolist()
    want = ref.combine_rewards(per_func, weights)
    assert got[0] == want[0] and math.isnan(got[1]) and math.isnan(want[1]) and got[2] == want[2]


def test_listwise_pair_weight():
    assert listwise_pair_weight(6) == pytest.approx(1 / math.comb(4, 2))
    with pytest.raises(ValueError):
        listwise_pair_weight(0)
