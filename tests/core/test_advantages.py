"""trl_ext.core.advantages against the plain-Python references of tests/reference.py."""

import math
import threading

import pytest
import torch

from tests import reference as ref
from trl_ext.core.advantages import gae, group_normalized, leave_one_out, minibatch_normalized, whiten

NAN = math.nan
EDGE_REWARDS = {
    "all_equal_group": ([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0], 4),
    "single_informative_member": ([0.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0], 4),
    "nan_members": ([NAN, 1.0, 0.0, 1.0, NAN, NAN, NAN, NAN], 4),
    "one_valid_member": ([NAN, NAN, 3.0, NAN, 0.5, 0.25, 0.0, 1.0], 4),
    "magistral_example": ([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0], 4),
}


def random_rewards(seed, n, nan_fraction=0.0):
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.randn(n, generator=generator, dtype=torch.float64)
    rewards[torch.rand(n, generator=generator) < nan_fraction] = NAN
    return rewards


def assert_close(actual, expected, atol=1e-9):
    assert actual.shape == (len(expected),)
    assert torch.allclose(actual, torch.tensor(expected, dtype=actual.dtype), atol=atol, rtol=1e-7), (
        actual.tolist(),
        expected,
    )


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("scale", ["group", "none"])
def test_group_normalized_matches_reference_on_random_rewards(seed, scale):
    rewards = random_rewards(seed, 24, nan_fraction=0.2 * (seed % 2))
    assert_close(group_normalized(rewards, 6, scale=scale), ref.grpo_advantages(rewards.tolist(), 6, scale))


@pytest.mark.parametrize("case", sorted(EDGE_REWARDS))
@pytest.mark.parametrize("scale", ["group", "none"])
def test_group_normalized_edge_cases(case, scale):
    rewards, group_size = EDGE_REWARDS[case]
    actual = group_normalized(torch.tensor(rewards, dtype=torch.float64), group_size, scale=scale)
    assert_close(actual, ref.grpo_advantages(rewards, group_size, scale))
    assert not torch.isnan(actual).any()


def test_group_normalized_all_equal_group_is_zero():
    assert torch.equal(group_normalized(torch.ones(4), 4), torch.zeros(4))


@pytest.mark.parametrize("seed", range(5))
def test_leave_one_out_matches_reference(seed):
    rewards = random_rewards(seed, 20, nan_fraction=0.25 * (seed % 2))
    assert_close(leave_one_out(rewards, 5), ref.rloo_advantages(rewards.tolist(), 5))


@pytest.mark.parametrize("case", sorted(EDGE_REWARDS))
def test_leave_one_out_edge_cases(case):
    rewards, group_size = EDGE_REWARDS[case]
    assert_close(
        leave_one_out(torch.tensor(rewards, dtype=torch.float64), group_size), ref.rloo_advantages(rewards, group_size)
    )


def test_leave_one_out_equals_scaled_centring_without_nan():
    rewards = random_rewards(7, 12)
    centred = rewards.view(-1, 4) - rewards.view(-1, 4).mean(dim=1, keepdim=True)
    assert torch.allclose(leave_one_out(rewards, 4), (4 / 3 * centred).view(-1))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("minibatch_size", [4, 8, 6, 5, 64])  # 6 and 5 do not divide the batch of 24
def test_minibatch_normalized_matches_reference(seed, minibatch_size):
    rewards = random_rewards(seed, 24, nan_fraction=0.15 * (seed % 2))
    assert_close(
        minibatch_normalized(rewards, 4, minibatch_size), ref.magistral_advantages(rewards.tolist(), 4, minibatch_size)
    )


@pytest.mark.parametrize("case", sorted(EDGE_REWARDS))
def test_minibatch_normalized_edge_cases(case):
    rewards, group_size = EDGE_REWARDS[case]
    assert_close(
        minibatch_normalized(torch.tensor(rewards, dtype=torch.float64), group_size, 8),
        ref.magistral_advantages(rewards, group_size, 8),
    )


def test_minibatch_normalized_is_not_trl_batch_scaling():
    """TRL's scale_rewards="batch" gives −1.403 on this example where Magistral gives −1.620."""
    rewards = torch.tensor(EDGE_REWARDS["magistral_example"][0], dtype=torch.float64)
    assert minibatch_normalized(rewards, 4, 8)[3].item() == pytest.approx(-1.620, abs=1e-3)
    trl_batch = (rewards.view(-1, 4) - rewards.view(-1, 4).mean(1, keepdim=True)).view(-1) / (rewards.std() + 1e-4)
    assert trl_batch[3].item() == pytest.approx(-1.403, abs=1e-3)


def random_token_batch(seed, rows=4, width=7):
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.randn(rows, width, generator=generator, dtype=torch.float64)
    values = torch.randn(rows, width, generator=generator, dtype=torch.float64)
    mask = torch.rand(rows, width, generator=generator) > 0.3
    mask[0] = True  # a full row
    mask[1] = False  # an empty row
    mask[2, 4:] = False  # right padding
    return rewards, values, mask


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (1.0, 0.95), (0.9, 0.8), (0.0, 0.5)])
def test_gae_matches_reference(seed, gamma, lam):
    rewards, values, mask = random_token_batch(seed)
    advantages, returns = gae(rewards, values, mask, gamma=gamma, lam=lam)
    for row in range(rewards.shape[0]):
        expected_adv, expected_ret = ref.gae_row(
            rewards[row].tolist(), values[row].tolist(), mask[row].tolist(), gamma, lam
        )
        assert_close(advantages[row], expected_adv)
        assert_close(returns[row], expected_ret)


def test_gae_empty_row_and_masked_positions_are_zero():
    rewards, values, mask = random_token_batch(0)
    advantages, returns = gae(rewards, values, mask, gamma=1.0, lam=0.95)
    assert torch.equal(advantages[~mask], torch.zeros_like(advantages[~mask]))
    assert torch.equal(returns[1], torch.zeros_like(returns[1]))


@pytest.mark.parametrize("seed", range(3))
def test_whiten_matches_reference(seed):
    _, values, mask = random_token_batch(seed)
    expected = ref.whiten(values.tolist(), mask.tolist())
    actual = whiten(values, mask)
    for row in range(values.shape[0]):
        assert_close(actual[row], expected[row])


class ThreadAllReduce:
    """An all-reduce(sum) between threads standing in for processes: each deposits, waits, then sums."""

    def __init__(self, world_size):
        self.barrier = threading.Barrier(world_size)
        self.slots = [None] * world_size

    def for_rank(self, rank):
        def all_reduce_sum(tensor):
            self.slots[rank] = tensor.clone()
            self.barrier.wait()
            total = sum(self.slots)
            self.barrier.wait()
            return total

        return all_reduce_sum


def test_whiten_global_statistics_through_all_reduce():
    """Two "processes" with different T get the statistics of their union, exchanging sums only."""
    _, values, mask = random_token_batch(1, rows=4, width=9)
    shards = [(values[:2, :9], mask[:2, :9]), (values[2:, :5], mask[2:, :5])]
    union = ref.whiten(
        [row[:9] for row in values[:2].tolist()] + [row[:5] for row in values[2:].tolist()],
        [row[:9] for row in mask[:2].tolist()] + [row[:5] for row in mask[2:].tolist()],
    )
    reducer, outputs = ThreadAllReduce(2), [None, None]

    def run(rank):
        outputs[rank] = whiten(*shards[rank], all_reduce_sum=reducer.for_rank(rank))

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    for row, expected in enumerate(union):
        assert_close(outputs[row // 2][row % 2], expected)


def test_whiten_shift_mean_false_keeps_mean():
    values = torch.tensor([[1.0, 2.0, 3.0, 10.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0]])
    out = whiten(values, mask, shift_mean=False)
    assert out[0, :3].mean().item() == pytest.approx(2.0)
    assert out[0, 3].item() == 0.0


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: group_normalized(torch.zeros(7), 4), "group_size"),
        (lambda: group_normalized(torch.zeros(8), 4, scale="batch"), "scale"),
        (lambda: group_normalized(torch.zeros(2, 4), 4), "rewards"),
        (lambda: leave_one_out(torch.zeros(4), 1), "group_size"),
        (lambda: minibatch_normalized(torch.zeros(8), 4, 0), "minibatch_size"),
        (lambda: gae(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3)), "values"),
        (lambda: gae(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3), gamma=1.5), "gamma"),
        (lambda: gae(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3), lam=-0.1), "lam"),
        (lambda: whiten(torch.zeros(2, 3), torch.ones(2, 4)), "mask"),
        (lambda: whiten(torch.zeros(2, 3), torch.zeros(2, 3)), "mask"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        call()
