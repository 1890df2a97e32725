"""trl_ext.core.kl against the plain-Python references of tests/reference.py."""

import pytest
import torch

from tests import reference as ref
from tests.core.test_losses import per_element, random_logps
from trl_ext.core.kl import kl_estimate


@pytest.mark.parametrize("kind", ["k1", "k2", "k3"])
@pytest.mark.parametrize("seed", range(3))
def test_kl_estimate_matches_reference(kind, seed):
    logp, ref_logp, _ = random_logps(seed)
    expected = per_element(lambda a, b: ref.kl(a, b, kind), logp, ref_logp)
    assert torch.allclose(kl_estimate(logp, ref_logp, kind), expected, atol=1e-12)


def test_kl_estimates_vanish_when_policies_agree_and_k3_is_non_negative():
    logp, ref_logp, _ = random_logps(0)
    for kind in ("k1", "k2", "k3"):
        assert torch.equal(kl_estimate(logp, logp, kind), torch.zeros_like(logp))
    assert (kl_estimate(logp, ref_logp, "k3") >= 0).all()


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: kl_estimate(torch.zeros(2), torch.zeros(2), "k4"), "kind"),
        (lambda: kl_estimate(torch.zeros(2), torch.zeros(3)), "ref_logp"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, argument):
    with pytest.raises(ValueError, match=f"`{argument}`"):
        call()
