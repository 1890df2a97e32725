"""trl_ext.core.shaping against the plain-Python references of tests/reference.py."""

import pytest
import torch

from tests import reference as ref
from trl_ext.core.shaping import overlong_penalty


@pytest.mark.parametrize(("max_length", "cache_length", "max_penalty"), [(20, 4, 1.0), (16, 16, 0.1), (10, 0, 1.0)])
def test_overlong_penalty_matches_reference(max_length, cache_length, max_penalty):
    lengths = torch.arange(0, max_length + 5)
    expected = [ref.overlong(int(n), max_length, cache_length, max_penalty) for n in lengths]
    actual = overlong_penalty(lengths, max_length, cache_length, max_penalty)
    assert torch.allclose(actual.double(), torch.tensor(expected, dtype=torch.float64), atol=1e-7)


def test_overlong_penalty_dapo_values():
    # DAPO Eq. 13 with L_max = 20480, L_cache = 4096: 0 up to 16384, −1 at 20480, −1 beyond.
    lengths = torch.tensor([16384, 18432, 20480, 20481])
    assert overlong_penalty(lengths, 20480, 4096).tolist() == [0.0, -0.5, -1.0, -1.0]


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: overlong_penalty(torch.tensor([1]), 10, 11), "cache_length"),
        (lambda: overlong_penalty(torch.tensor([1]), 0, 0), "max_length"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        call()
