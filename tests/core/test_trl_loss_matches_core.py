"""TRL's GRPO training loss equals core's stated references (clipped_surrogate + aggregate), micro-batch by micro-batch.

Runs train one rollout for two optimizer steps (steps_per_generation = 2 x gradient_accumulation_steps = 4): the
second update is off-policy, so ratios differ from 1 and the small epsilons clip. For every micro-batch the
recorded TRL loss is recomputed from its inputs (log-probs from a plain forward, TRL's old log-probs, advantages,
completion mask). What TRL 1.16 does, and what is checked here, with P processes, GA = gradient_accumulation_steps
and S = steps_per_generation:
- "grpo":    aggregate(ℓ, m, "seq_mean_token_mean") / GA
- "dr_grpo": aggregate(ℓ, m, "seq_mean_token_sum_norm", max_tokens=max_completion_length) / GA
- "dapo":    aggregate(ℓ, m, "token_mean", num_tokens=N / P · GA / S), where N = num_items_in_batch is the
  token count of the whole generation batch over all processes (not the micro-batch's own count), so summed
  over one accumulation window the loss is the step's tokens' sum over the step's mean per-process token count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.scripts import trl_loss_vs_core as script
from trl_ext.core.losses import aggregate, clipped_surrogate

SCRIPT = Path(script.__file__)


def _torchrun_two_processes(model_path: str, out_dir: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SCRIPT.parents[2])}
    # --standalone: a free port, so concurrent test runs on one machine do not collide on 29500.
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(SCRIPT)]
    result = subprocess.run([*command, model_path, str(out_dir)], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]


# every test here reads `runs`: on one xdist worker its launch runs once, not once per worker that got a test
pytestmark = pytest.mark.xdist_group("trl-loss-runs")


@pytest.fixture(scope="module")
def runs(tiny_policy_path, tmp_path_factory):
    """{1: [rank-0 results], 2: [rank-0 results, rank-1 results]}; results: {loss_type: run(...)}."""
    one, two = tmp_path_factory.mktemp("one-process"), tmp_path_factory.mktemp("two-processes")
    script.main(tiny_policy_path, str(one))
    _torchrun_two_processes(tiny_policy_path, two)
    return {n: [torch.load(d / f"rank-{r}.pt", weights_only=False) for r in range(n)] for n, d in ((1, one), (2, two))}


def core_loss(record: dict, loss_type: str, num_processes: int) -> torch.Tensor:
    """TRL's micro-batch loss as core states it (float64)."""
    per_token = clipped_surrogate(
        record["logp"].double(),
        record["old_per_token_logps"].double(),
        record["advantages"].double(),
        eps_low=script.EPS_LOW,
        eps_high=script.EPS_HIGH,
    )
    mask = record["completion_mask"]
    if loss_type == "dapo":
        step_tokens = record["num_items_in_batch"].double().clamp(min=1.0) / num_processes
        step_tokens = step_tokens * script.GRAD_ACCUM / script.STEPS_PER_GENERATION
        return aggregate(per_token, mask, "token_mean", num_tokens=step_tokens)
    if loss_type == "grpo":
        return aggregate(per_token, mask, "seq_mean_token_mean") / script.GRAD_ACCUM
    max_tokens = script.MAX_COMPLETION_LENGTH
    return aggregate(per_token, mask, "seq_mean_token_sum_norm", max_tokens=max_tokens) / script.GRAD_ACCUM


def clipped_tokens(record: dict) -> int:
    """Valid tokens where the clip binds: ratio past 1 + ε_high with A > 0, or below 1 − ε_low with A < 0."""
    ratio = torch.exp(record["logp"] - record["old_per_token_logps"])
    advantages = record["advantages"].unsqueeze(1)
    high = (ratio > 1 + script.EPS_HIGH) & (advantages > 0)
    low = (ratio < 1 - script.EPS_LOW) & (advantages < 0)
    return int(((high | low) & record["completion_mask"].bool()).sum())


@pytest.mark.parametrize("num_processes", [1, 2])
@pytest.mark.parametrize("loss_type", script.LOSS_TYPES)
def test_trl_training_loss_equals_core_reference(runs, loss_type, num_processes):
    ranks = [results[loss_type] for results in runs[num_processes]]
    assert all(result["num_processes"] == num_processes for result in ranks)
    # The generation batch is the whole of N: every rank's micro-batches of the one rollout, summed.
    all_records = [record for result in ranks for record in result["records"]]
    total_tokens = sum(int(record["completion_mask"].sum()) for record in all_records)
    for result in ranks:
        records = result["records"]
        assert [record["step"] for record in records] == [0] * script.GRAD_ACCUM + [1] * script.GRAD_ACCUM
        for record in records:
            assert int(record["num_items_in_batch"]) == total_tokens
            expected = core_loss(record, loss_type, num_processes).item()
            assert record["loss"].item() == pytest.approx(expected, abs=1e-6), (record["step"], loss_type)
        # The first update is on-policy (old log-probs = current), the second is not, and its clip binds.
        for record in records:
            mask = record["completion_mask"].bool()
            drift = (record["logp"] - record["old_per_token_logps"])[mask].abs().max().item()
            assert drift < 1e-5 if record["step"] == 0 else drift > 1e-2
        assert sum(clipped_tokens(record) for record in records if record["step"] == 1) > 0
        assert max(log["clip_ratio/region_mean"] for log in result["logs"]) > 0  # TRL's own clip metric agrees


@pytest.mark.parametrize("num_processes", [1, 2])
def test_trl_dapo_divides_by_the_generation_batch_tokens_not_the_micro_batch_own(runs, num_processes):
    """The normaliser is checked, not incidental: micro-batches differ in token counts, and the micro-batch's own
    token mean (scaled for accumulation) is not what TRL computes."""
    records = [record for results in runs[num_processes] for record in results["dapo"]["records"]]
    assert len({int(record["completion_mask"].sum()) for record in records}) > 1
    gaps = []
    for record in records:
        per_token = clipped_surrogate(
            record["logp"].double(),
            record["old_per_token_logps"].double(),
            record["advantages"].double(),
            eps_low=script.EPS_LOW,
            eps_high=script.EPS_HIGH,
        )
        own = aggregate(per_token, record["completion_mask"], "token_mean") / script.GRAD_ACCUM
        gaps.append(abs(own.item() - record["loss"].item()))
    assert max(gaps) > 1e-4
