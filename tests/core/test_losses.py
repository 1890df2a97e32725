"""trl_ext.core.losses against the plain-Python references of tests/reference.py."""

import math

import pytest
import torch

from tests import reference as ref
from trl_ext.core.losses import aggregate, clipped_surrogate, clipped_value_loss

NAN = math.nan


def random_logps(seed, shape=(4, 6)):
    generator = torch.Generator().manual_seed(seed)
    logp = -torch.rand(shape, generator=generator, dtype=torch.float64) * 3
    old_logp = logp + 0.5 * torch.randn(shape, generator=generator, dtype=torch.float64)
    return logp, old_logp, generator


def per_element(fn, *tensors):
    flat = [t.reshape(-1).tolist() for t in tensors]
    return torch.tensor([fn(*values) for values in zip(*flat)], dtype=torch.float64).view(tensors[0].shape)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("eps_low", "eps_high", "dual_clip"), [(0.2, None, None), (0.2, 0.28, None), (0.2, 0.4, 3.0)])
def test_clipped_surrogate_matches_reference(seed, eps_low, eps_high, dual_clip):
    logp, old_logp, generator = random_logps(seed)
    advantages = torch.randn(logp.shape, generator=generator, dtype=torch.float64) * 2
    expected = per_element(
        lambda a, b, adv: ref.surrogate(a, b, adv, eps_low, eps_high if eps_high is not None else eps_low, dual_clip),
        logp,
        old_logp,
        advantages,
    )
    actual = clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high, dual_clip)
    assert torch.allclose(actual, expected, atol=1e-12)


def test_clipped_surrogate_broadcasts_sequence_advantages():
    logp, old_logp, _ = random_logps(1)
    advantages = torch.tensor([1.0, -1.0, 0.5, 0.0], dtype=torch.float64)
    tokenwise = clipped_surrogate(logp, old_logp, advantages.unsqueeze(1).expand_as(logp), 0.2, 0.28)
    assert torch.equal(clipped_surrogate(logp, old_logp, advantages, 0.2, 0.28), tokenwise)


def test_clipped_surrogate_gradient_is_zero_outside_the_trust_region():
    old_logp = torch.zeros(1, 3, dtype=torch.float64)
    logp = torch.log(torch.tensor([[1.5, 1.1, 0.5]], dtype=torch.float64)).requires_grad_()
    advantages = torch.tensor([1.0], dtype=torch.float64)
    clipped_surrogate(logp, old_logp, advantages, 0.2, 0.28).sum().backward()
    # ratio 1.5 > 1.28 with A > 0: clipped, no gradient; 1.1 inside: gradient −A·ρ; 0.5 < 0.8 with A > 0: unclipped.
    assert logp.grad[0, 0].item() == 0.0
    assert logp.grad[0, 1].item() == pytest.approx(-1.1)
    assert logp.grad[0, 2].item() == pytest.approx(-0.5)


def test_dual_clip_bounds_the_loss_for_negative_advantages():
    old_logp = torch.zeros(1, 1, dtype=torch.float64)
    logp = torch.log(torch.tensor([[10.0]], dtype=torch.float64))
    advantages = torch.tensor([-1.0], dtype=torch.float64)
    assert clipped_surrogate(logp, old_logp, advantages).item() == pytest.approx(10.0)
    assert clipped_surrogate(logp, old_logp, advantages, dual_clip=3.0).item() == pytest.approx(3.0)


def random_loss_and_mask(seed, rows=5, width=6):
    generator = torch.Generator().manual_seed(seed)
    loss = torch.randn(rows, width, generator=generator, dtype=torch.float64)
    mask = torch.rand(rows, width, generator=generator) > 0.4
    mask[0] = True
    mask[1] = False  # an empty row
    loss[~mask] = NAN  # masked positions must never leak into the result
    return loss, mask


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
@pytest.mark.parametrize("seed", range(3))
def test_aggregate_matches_reference(mode, seed):
    loss, mask = random_loss_and_mask(seed)
    expected = ref.aggregate(loss.tolist(), mask.int().tolist(), mode, max_tokens=16)
    assert aggregate(loss, mask, mode, max_tokens=16).item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_token_mean_with_num_tokens_divides_by_the_given_count_not_the_own(seed):
    """A micro-batch of a larger step: Σ m·ℓ over its own valid tokens, divided by the step's token count."""
    loss, mask = random_loss_and_mask(seed)
    total = 0.0
    for i in range(loss.shape[0]):
        for t in range(loss.shape[1]):
            if mask[i, t]:
                total += float(loss[i, t])
    own_count = int(mask.sum())
    assert aggregate(loss, mask, "token_mean", num_tokens=37.5).item() == pytest.approx(total / 37.5, abs=1e-12)
    assert aggregate(loss, mask, "token_mean", num_tokens=torch.tensor(37.5)).item() == pytest.approx(total / 37.5)
    own = aggregate(loss, mask, "token_mean", num_tokens=own_count).item()
    assert own == pytest.approx(aggregate(loss, mask, "token_mean").item(), abs=1e-12)


def test_aggregate_is_differentiable():
    loss = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    aggregate(loss, mask, "token_mean").backward()
    assert torch.allclose(loss.grad, mask.double() / 7)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("clip_range", [0.05, 0.2, 10.0])
def test_clipped_value_loss_matches_reference(seed, clip_range):
    generator = torch.Generator().manual_seed(seed)
    values, old_values, returns = (torch.randn(4, 5, generator=generator, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(4, 5, generator=generator) > 0.3
    expected = ref.value_loss(
        values.view(-1).tolist(),
        old_values.view(-1).tolist(),
        returns.view(-1).tolist(),
        mask.view(-1).tolist(),
        clip_range,
    )
    assert clipped_value_loss(values, old_values, returns, mask, clip_range).item() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: clipped_surrogate(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), dual_clip=1.0), "dual_clip"),
        (lambda: clipped_surrogate(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2)), "old_logp"),
        (lambda: clipped_surrogate(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3)), "advantages"),
        (lambda: aggregate(torch.zeros(2, 3), torch.ones(2, 3), "sum"), "mode"),
        (lambda: aggregate(torch.zeros(2, 3), torch.ones(2, 3), "seq_mean_token_sum_norm"), "max_tokens"),
        (lambda: aggregate(torch.zeros(2, 3), torch.ones(3, 3), "token_mean"), "mask"),
        (lambda: aggregate(torch.zeros(2, 3), torch.ones(2, 3), "token_mean", num_tokens=0), "num_tokens"),
        (lambda: aggregate(torch.zeros(2, 3), torch.ones(2, 3), "seq_mean_token_mean", num_tokens=6), "num_tokens"),
        (lambda: clipped_value_loss(*(torch.zeros(2, 3),) * 3, torch.ones(2, 2), 0.2), "mask"),
        (lambda: clipped_value_loss(*(torch.zeros(2, 3),) * 3, torch.ones(2, 3), 0.0), "clip_range"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        call()
