"""Dynamic sampling with refill (DAPO, arXiv 2503.14476 §3.2, Algorithm 1): the round and batch bookkeeping.

The trainer generates and scores rounds of prompt groups (no log-prob passes) until all processes together hold
enough informative groups, then hands the kept groups to TRL's step once. Everything here is decided from the GATHERED
per-round outcomes, identical on all ranks, so every rank reaches the same decisions (how many groups each round
generates, how many rounds, which groups each rank trains on and so which groups move between ranks).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import torch

MAX_ROUND_GROWTH = 4  # a round generates at most this many times the groups of the step's previous round


class GroupRef(NamedTuple):
    """A prompt group kept for the optimizer batch: the round it was generated in, the rank that generated it and its
    index among that rank's groups of the round."""

    round: int
    rank: int
    group: int
    filled: bool  # an uninformative group used to fill the batch when the rounds ran out (advantage 0)


def _per_rank(mask: torch.Tensor, num_processes: int) -> torch.Tensor:
    return mask.view(num_processes, -1)


def missing_groups(informative_rounds: list[torch.Tensor], num_processes: int, needed: int) -> int:
    """Informative groups the whole batch still lacks: ``num_processes · needed`` minus the GATHERED informative count.

    Kept groups are pooled over the processes (``plan_batch``), so a step is done when all processes together hold
    enough, whichever rank generated them.
    """
    have = sum(int(mask.sum()) for mask in informative_rounds)
    return max(0, num_processes * needed - have)


def groups_per_rank(groups: int, num_processes: int) -> int:
    """Each rank's share of ``groups`` (the next collective round, sized from the global missing count): ⌈groups / P⌉.

    Sizing the round globally and then splitting it rounds up once, not once per rank."""
    return -(-groups // num_processes)


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
    """For each rank, the ``needed`` groups of its optimizer batch, sorted by (round, rank, group).

    ``informative_rounds[k]`` is the gathered bool mask of round k (one entry per group, ranks in order, the same
    number of groups on every rank). Informative groups are pooled: each rank first keeps its own, round by round (up
    to ``needed``, so as few groups as possible move); the surplus, in (round, rank, group) order, goes to the ranks
    that lack groups, in rank order. A rank still short (too few informative groups over all ranks) fills with its
    own first uninformative groups (``filled=True``); it generated at least ``needed`` groups, so it has enough.
    """
    own, spare = [[] for _ in range(num_processes)], [[] for _ in range(num_processes)]
    for k, mask in enumerate(informative_rounds):
        for rank, groups in enumerate(_per_rank(mask, num_processes).tolist()):
            for g, ok in enumerate(groups):
                (own if ok else spare)[rank].append(GroupRef(k, rank, g, False))
    kept = [refs[:needed] for refs in own]
    surplus = sorted(ref for refs in own for ref in refs[needed:])
    for rank in range(num_processes):
        taken, surplus = surplus[: needed - len(kept[rank])], surplus[needed - len(kept[rank]) :]
        kept[rank] += taken
        kept[rank] += [ref._replace(filled=True) for ref in spare[rank][: needed - len(kept[rank])]]
    return [sorted(refs) for refs in kept]


def kept_gathered_rows(plan: list[list[GroupRef]], round_sizes: list[int], group_size: int) -> list[tuple[int, int]]:
    """(round, row in that round's GATHERED tensor) of every kept row, ranks in order: the rows TRL would have
    gathered had each rank generated the groups it trains on itself."""
    rows = []
    for refs in plan:
        for ref in refs:
            start = (ref.rank * round_sizes[ref.round] + ref.group) * group_size
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
