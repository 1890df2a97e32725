"""Dynamic sampling with refill (DAPO, arXiv 2503.14476 §3.2, Algorithm 1): the batch bookkeeping.

The trainer generates rounds of prompt groups until every process holds enough informative groups. Everything here
is decided from the GATHERED per-round rewards, which are identical on all ranks, so every rank reaches the same
decision (how many rounds, which groups each rank keeps) without any extra communication.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import torch

# Generation-output keys that dynamic sampling knows how to merge across rounds, with their padding value.
# Prompts are left-padded and completions right-padded, as TRL pads them; None means "the pad token id".
LEFT_PADDED: dict[str, float | None] = {"prompt_ids": None, "prompt_mask": 0}
RIGHT_PADDED: dict[str, float | None] = {
    "completion_ids": None,
    "completion_mask": 0,
    "tool_mask": 1,  # TRL pads tool_mask with 1
    "old_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
    "importance_sampling_ratio": 1.0,
    "advantages": 0.0,  # (B,) from TRL, or (B, T) from a subclass
}
SCALARS = ("num_items_in_batch",)


class GroupRef(NamedTuple):
    """A prompt group kept for the optimizer batch: the round it was generated in and its index on its rank."""

    round: int
    group: int
    filled: bool  # an uninformative group used to fill the batch when the rounds ran out (advantage 0)


def _split_by_rank(informative: torch.Tensor, num_processes: int) -> list[torch.Tensor]:
    return list(informative.view(num_processes, -1))


def rounds_complete(informative_rounds: list[torch.Tensor], num_processes: int) -> bool:
    """Whether every rank has at least as many informative groups as one round gives it."""
    per_rank = torch.stack([mask.view(num_processes, -1).sum(dim=1) for mask in informative_rounds]).sum(dim=0)
    return bool((per_rank >= informative_rounds[0].numel() // num_processes).all())


def plan_batch(informative_rounds: list[torch.Tensor], num_processes: int) -> list[list[GroupRef]]:
    """For each rank, the groups of its optimizer batch, sorted by (round, group).

    ``informative_rounds[k]`` is the gathered bool mask of round k (one entry per group, ranks in order). Each rank
    keeps its first informative groups, round by round; if there are not enough, it fills with its first
    uninformative ones (``filled=True``).
    """
    needed = informative_rounds[0].numel() // num_processes
    plan = []
    for rank in range(num_processes):
        informative, spare = [], []
        for k, mask in enumerate(informative_rounds):
            for g, ok in enumerate(_split_by_rank(mask, num_processes)[rank].tolist()):
                (informative if ok else spare).append(GroupRef(k, g, False))
        kept = informative[:needed]
        kept += [ref._replace(filled=True) for ref in spare[: needed - len(kept)]]
        plan.append(sorted(kept))
    return plan


def group_rows(refs: list[GroupRef], group_size: int) -> torch.Tensor:
    """Row indices (within their round's local batch) of the given groups, in order."""
    if not refs:
        return torch.zeros(0, dtype=torch.long)
    return torch.cat([torch.arange(ref.group * group_size, (ref.group + 1) * group_size) for ref in refs])


def take_rows(output: dict, rows: torch.Tensor) -> dict:
    """The rows ``rows`` of one round's generation output (scalars are kept as they are)."""
    taken = {}
    for key, value in output.items():
        if key in SCALARS:
            taken[key] = value
        elif key in LEFT_PADDED or key in RIGHT_PADDED:
            taken[key] = value[rows.to(value.device)]
        else:
            raise ValueError(
                f"dynamic_sampling cannot merge the generation output key {key!r} across rounds (multimodal inputs "
                "and custom keys are not supported); set dynamic_sampling=False."
            )
    return taken


def _pad_to(value: torch.Tensor, width: int, pad_value: float, left: bool) -> torch.Tensor:
    missing = width - value.shape[1]
    if missing == 0:
        return value
    padding = value.new_full((value.shape[0], missing), pad_value)
    return torch.cat([padding, value] if left else [value, padding], dim=1)


def concat_batches(batches: list[dict], pad_token_id: int) -> dict:
    """Concatenate generation outputs row-wise: prompts re-padded on the left, completions on the right.

    Prompt columns that are padding in every row are trimmed (rows come from rounds padded to different widths).
    ``num_items_in_batch`` is left to the caller: it is global and must be recomputed across processes.
    """
    merged = {}
    for key in batches[0]:
        if key in SCALARS:
            continue
        values = [batch[key] for batch in batches]
        if values[0].dim() == 1:
            merged[key] = torch.cat(values)
            continue
        left = key in LEFT_PADDED
        pad_value = (LEFT_PADDED if left else RIGHT_PADDED)[key]
        pad_value = pad_token_id if pad_value is None else pad_value
        width = max(value.shape[1] for value in values)
        merged[key] = torch.cat([_pad_to(value, width, pad_value, left) for value in values])
    used = merged["prompt_mask"].bool().any(dim=0)
    first = int(used.nonzero()[0]) if used.any() else 0
    merged["prompt_ids"], merged["prompt_mask"] = merged["prompt_ids"][:, first:], merged["prompt_mask"][:, first:]
    return merged


def refill_batches(
    dataset_size: int,
    num_generations: int,
    generation_batch_size: int,
    num_processes: int,
    rank: int,
    seed: int,
) -> Iterator[list[int]]:
    """Dataset indices of this rank's refill batches, forever: a second sampler sharded like TRL's.

    Like TRL's RepeatSampler with repeat_count=1: shuffled prompts (its own generator, so the global RNG is
    untouched), each repeated ``num_generations`` times, ``generation_batch_size`` rows per global batch, rank r
    taking the r-th contiguous slice; incomplete trailing batches are dropped and each epoch is reshuffled.
    """
    prompts_per_batch = generation_batch_size // num_generations
    if dataset_size < prompts_per_batch:
        raise ValueError(
            f"dynamic_sampling needs at least {prompts_per_batch} prompts in train_dataset to refill a generation "
            f"batch, got {dataset_size}."
        )
    local = generation_batch_size // num_processes
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(dataset_size, generator=generator).tolist()
        for start in range(0, dataset_size - prompts_per_batch + 1, prompts_per_batch):
            rows = [index for index in order[start : start + prompts_per_batch] for _ in range(num_generations)]
            yield rows[rank * local : (rank + 1) * local]
