"""Dynamic sampling in two processes (torchrun, gloo on CPU) pools the kept groups: a rank whose own prompts are all
uninformative trains on groups another rank generated, each group moving whole (prompt row, completion tokens,
rewards), and the rounds stop as soon as both ranks together hold enough informative groups."""

from __future__ import annotations

import json

import pytest
import torch

from tests.scripts import pooled_dynamic_sampling as script
from tests.trainers.test_grpo_distributed import _torchrun_two_processes_script

G = script.G


# every test here reads `pooled`: on one xdist worker its launch runs once, not once per worker that got a test
pytestmark = pytest.mark.xdist_group("dynamic-sampling-pooled")


@pytest.fixture(scope="module")
def pooled(tiny_policy_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("pooled") / "records.json"
    _torchrun_two_processes_script(script.__file__, tiny_policy_path, str(out))
    return json.loads(out.read_text())


def _key(group: dict) -> tuple:
    return group["pid"], json.dumps(group["completion_ids"])


def test_rounds_stop_on_the_global_informative_count_and_every_generated_row_is_counted(pooled):
    processes, needed, ranks = pooled["num_processes"], pooled["needed"], pooled["ranks"]
    assert processes == 2 and len(pooled["logs"]) == script.STEPS
    for step, log in enumerate(pooled["logs"]):
        masks = ranks[0][step]["masks"]
        assert ranks[1][step]["masks"] == masks  # gathered: the same decisions on both ranks
        per_rank = [torch.tensor(mask).view(processes, -1) for mask in masks]
        assert not any(mask[1].any() for mask in per_rank)  # rank 1 never finds an informative group itself
        informative = torch.tensor([int(mask.sum()) for mask in per_rank]).cumsum(0)
        # pooled rule: the last round is the first one after which both ranks together hold P·needed
        assert int(informative[-1]) >= processes * needed
        assert all(int(count) < processes * needed for count in informative[:-1])
        assert log["dynamic_sampling/rounds"] == len(masks)
        assert log["dynamic_sampling/filled_uninformative"] == 0
        generated = sum(ranks[rank][step]["generated_rows"] for rank in range(processes))
        assert generated == G * sum(len(mask) for mask in masks) == G * log["dynamic_sampling/generated_groups"]
        assert [ranks[rank][step]["generated_rows"] for rank in range(processes)] == [generated // processes] * 2


def test_each_rank_trains_on_its_share_and_groups_move_whole(pooled):
    ranks, needed = pooled["ranks"], pooled["needed"]
    for step in range(script.STEPS):
        generated = [{_key(group) for group in ranks[rank][step]["generated"]} for rank in range(2)]
        trained = [ranks[rank][step]["trained"] for rank in range(2)]
        assert [len(groups) for groups in trained] == [needed, needed]
        keys = [_key(group) for groups in trained for group in groups]
        assert len(set(keys)) == len(keys)  # no group trained twice
        assert all(_key(group) in generated[0] for group in trained[0])  # rank 0 keeps its own
        assert all(_key(group) in generated[0] and _key(group) not in generated[1] for group in trained[1])  # moved
        for rank in range(2):
            rows = ranks[rank][step]["output_completion_ids"]
            flat = [ids for group in trained[rank] for ids in group["completion_ids"]]
            assert [row[: len(ids)] for row, ids in zip(rows, flat, strict=True)] == flat  # TRL's step got the tokens
            for group in trained[rank]:
                scores = torch.tensor(group["scores"])
                assert scores.std() > 0  # the moved prompt row carries rank 0's scores, not rank 1's copy
                expected = (scores - scores.mean()) / scores.std()  # the group's own rewards came with it
                assert torch.tensor(group["advantages"]) == pytest.approx(expected, abs=1e-3)
