"""The offline demo task: single-digit addition with boxed answers, built deterministically (no download)."""

from __future__ import annotations

from datasets import Dataset


def _problems(max_operand: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(max_operand + 1) for b in range(max_operand + 1)]


def arithmetic_prompts(max_operand: int = 4, repeats: int = 1) -> Dataset:
    """Conversational prompts "a+b" with the gold answer in `solution` (as `\\boxed{a+b}`, math_accuracy's gold)."""
    rows = [
        {"prompt": [{"role": "user", "content": f"{a}+{b}"}], "solution": f"\\boxed{{{a + b}}}"}
        for _ in range(repeats)
        for a, b in _problems(max_operand)
    ]
    return Dataset.from_list(rows)


def arithmetic_sft_pairs(max_operand: int = 4, repeats: int = 1) -> Dataset:
    """Prompt/completion pairs with the correct boxed answer, for a short supervised warm-up."""
    rows = [
        {"prompt": [{"role": "user", "content": f"{a}+{b}"}],
         "completion": [{"role": "assistant", "content": f"\\boxed{{{a + b}}}"}]}
        for _ in range(repeats)
        for a, b in _problems(max_operand)
    ]  # fmt: skip
    return Dataset.from_list(rows)
