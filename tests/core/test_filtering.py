"""trl_ext.core.filtering against the plain-Python references of tests/reference.py."""

import math

import pytest
import torch

from tests import reference as ref
from trl_ext.core.filtering import informative_groups

NAN = math.nan


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        ([1.0, 1.0, 1.0, 1.0], [False]),
        ([0.0, 0.0, 0.0, 1.0], [True]),
        ([NAN, 1.0, NAN, 1.0], [False]),
        ([NAN, 1.0, NAN, 0.0], [True]),
        ([NAN, NAN, NAN, 1.0], [False]),
        ([NAN, NAN, NAN, NAN], [False]),
    ],
)
def test_informative_groups_edge_cases(rewards, expected):
    assert informative_groups(torch.tensor(rewards), 4).tolist() == expected


@pytest.mark.parametrize("seed", range(3))
def test_informative_groups_matches_reference(seed):
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 2, (40,), generator=generator).double()
    rewards[torch.rand(40, generator=generator) < 0.2] = NAN
    expected = [ref.informative(g) for g in ref.groups(rewards.tolist(), 4)]
    assert informative_groups(rewards, 4).tolist() == expected


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: informative_groups(torch.zeros(6), 4), "group_size"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        call()
