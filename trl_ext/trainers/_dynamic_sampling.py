"""Dynamic sampling with refill (DAPO, arXiv 2503.14476 §3.2, Algorithm 1): the round and batch bookkeeping.

The trainer generates and scores rounds of prompt groups (no log-prob passes) until every process holds enough
informative groups, then hands the kept groups to TRL's step once. Everything here is decided from the GATHERED
per-round outcomes, identical on all ranks, so every rank reaches the same decisions (how many groups each round
generates, how many rounds, which groups each rank keeps) without any extra communication.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import torch

MAX_ROUND_GROWTH = 4  # a round generates at most this many times the groups of the step's previous round


class GroupRef(NamedTuple):
    """A prompt group kept for the optimizer batch: the round it was generated in and its index on its rank."""

    round: int
    group: int
    filled: bool  # an uninformative group used to fill the batch when the rounds ran out (advantage 0)


def _per_rank(mask: torch.Tensor, num_processes: int) -> torch.Tensor:
    return mask.view(num_processes, -1)


def missing_groups(informative_rounds: list[torch.Tensor], num_processes: int, needed: int) -> int:
    """The most informative groups any rank still lacks (rounds are collective, so the largest need sets them)."""
    if not informative_rounds:
        return needed
    have = torch.stack([_per_rank(mask, num_processes).sum(dim=1) for mask in informative_rounds]).sum(dim=0)
    return int((needed - have).clamp(min=0).max())


def round_groups(missing: int, informative_rate: float, max_groups: int, margin: float = 0.0) -> int:
    """Groups per process for the next round: n = ⌈(missing + margin·√(missing·(1 − rate))) / rate⌉, at least one
    and at most ``max_groups``.

    With margin 0 a round expects exactly the missing informative groups (so about half the steps need a second,
    small round); a margin of z standard deviations of that count makes a second round rarer (z = 1: about one step
    in six) for about z·√((1 − rate)/(missing·rate)) more generated groups.
    """
    rate = max(informative_rate, 1e-6)
    expected = missing + margin * math.sqrt(missing * max(1.0 - rate, 0.0))
    return max(1, min(max_groups, math.ceil(expected / rate - 1e-9)))


def plan_batch(informative_rounds: list[torch.Tensor], num_processes: int, needed: int) -> list[list[GroupRef]]:
    """For each rank, the ``needed`` groups of its optimizer batch, sorted by (round, group).

    ``informative_rounds[k]`` is the gathered bool mask of round k (one entry per group, ranks in order, the same
    number of groups on every rank). Each rank keeps its first informative groups, round by round; if there are not
    enough, it fills with its first uninformative ones (``filled=True``).
    """
    plan = []
    for rank in range(num_processes):
        informative, spare = [], []
        for k, mask in enumerate(informative_rounds):
            for g, ok in enumerate(_per_rank(mask, num_processes)[rank].tolist()):
                (informative if ok else spare).append(GroupRef(k, g, False))
        kept = informative[:needed]
        kept += [ref._replace(filled=True) for ref in spare[: needed - len(kept)]]
        plan.append(sorted(kept))
    return plan


def kept_gathered_rows(plan: list[list[GroupRef]], round_sizes: list[int], group_size: int) -> list[tuple[int, int]]:
    """(round, row in that round's GATHERED tensor) of every kept row, ranks in order: the rows TRL would have
    gathered had it generated the kept batch itself."""
    rows = []
    for rank, refs in enumerate(plan):
        for ref in refs:
            start = (rank * round_sizes[ref.round] + ref.group) * group_size
            rows.extend((ref.round, start + i) for i in range(group_size))
    return rows


class RateEstimate:
    """Running informative rate of the generated groups: decayed counts, so recent rounds weigh most."""

    def __init__(self, decay: float = 0.8):
        self.decay = decay
        self.informative = self.generated = 0.0

    @property
    def value(self) -> float:
        """The estimate; 1.0 before anything was generated (the first round is then the plain batch)."""
        return self.informative / self.generated if self.generated else 1.0

    def update(self, informative: int, generated: int) -> None:
        self.informative = self.decay * self.informative + informative
        self.generated = self.decay * self.generated + generated

    def state_dict(self) -> dict:
        return {"informative": self.informative, "generated": self.generated}

    def load_state_dict(self, state: dict) -> None:
        self.informative, self.generated = float(state["informative"]), float(state["generated"])


def refill_groups(
    dataset_size: int,
    num_generations: int,
    generation_batch_size: int,
    num_processes: int,
    rank: int,
    seed: int,
) -> Iterator[int]:
    """Dataset indices of this rank's refill prompts (one per group), forever: a second sampler sharded like TRL's.

    Like TRL's RepeatSampler with repeat_count=1: shuffled prompts (its own generator, so the global RNG is
    untouched), ``generation_batch_size // num_generations`` prompts per global batch, rank r taking the r-th
    contiguous slice; incomplete trailing batches are dropped and each epoch is reshuffled.
    """
    prompts_per_batch = generation_batch_size // num_generations
    if dataset_size < prompts_per_batch:
        raise ValueError(
            f"dynamic_sampling needs at least {prompts_per_batch} prompts in train_dataset to refill a generation "
            f"batch, got {dataset_size}."
        )
    local = prompts_per_batch // num_processes
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(dataset_size, generator=generator).tolist()
        for start in range(0, dataset_size - prompts_per_batch + 1, prompts_per_batch):
            yield from order[start : start + prompts_per_batch][rank * local : (rank + 1) * local]
