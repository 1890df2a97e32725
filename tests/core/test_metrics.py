"""pass@k against the combinatorial definition (Chen et al. 2021 Eq. 1) computed with math.comb."""

import math

import pytest
import torch

from trl_ext.core.metrics import pass_at_k

# A fixed table: (n, c, k) -> 1 − C(n−c, k)/C(n, k)
TABLE = [(n, c, k) for n in (1, 2, 5, 10, 16) for c in range(0, n + 1, max(1, n // 4)) for k in (1, 2, 5) if k <= n]


def reference(n, c, k):
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def test_pass_at_k_matches_the_combinatorial_definition():
    for k in (1, 2, 5):
        rows = [(nn, cc) for nn, cc, kk in TABLE if kk == k]
        actual = pass_at_k(torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows]), k)
        expected = torch.tensor([reference(nn, cc, k) for nn, cc in rows], dtype=torch.float64)
        assert torch.allclose(actual, expected, atol=1e-12)


def test_pass_at_1_is_the_fraction_correct():
    assert pass_at_k(torch.tensor([4, 10]), torch.tensor([1, 7]), 1).tolist() == pytest.approx([0.25, 0.7])


@pytest.mark.parametrize(
    ("n", "c", "k", "argument"),
    [([2], [1], 3, "`k`"), ([2], [3], 1, "`num_correct`"), ([2, 3], [1], 1, "`num_correct`"), ([2], [1], 0, "`k`")],
)
def test_bad_arguments(n, c, k, argument):
    with pytest.raises(ValueError, match=argument):
        pass_at_k(torch.tensor(n), torch.tensor(c), k)
