"""Collator wrappers shared by the preference trainers."""

from __future__ import annotations

import torch


class FloatColumnCollator:
    """Wraps a collator: adds the examples' ``column`` (a per-row number, e.g. a DPO margin or a pair weight) to its
    batch as a float tensor, when the examples carry it."""

    def __init__(self, collator, column: str):
        self.collator, self.column = collator, column

    def __call__(self, examples: list[dict]) -> dict:
        batch = self.collator(examples)
        if self.column in examples[0]:
            batch[self.column] = torch.tensor([float(example[self.column]) for example in examples])
        return batch
