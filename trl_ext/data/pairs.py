"""Preference pairs mined from verifiable rewards: sample K completions per prompt, score them, pair them.

The output feeds ``trl_ext.DPOTrainer`` (or TRL's) directly: ``prompt``/``chosen``/``rejected`` plus
``chosen_score``, ``rejected_score`` and ``margin`` (``margin_scale`` times the score gap), and the prompt row's
other columns. Iterating mine → DPO → mine gives iterative (online) DPO.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from datasets import Dataset
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from trl_ext.core.preference import combine_rewards

logger = logging.getLogger(__name__)

# A TRL reward function: f(prompts=..., completions=..., completion_ids=..., **columns) -> list[float | None].
RewardFunc = Callable[..., list]
STRATEGIES = ("best_vs_worst", "correct_vs_incorrect")
OUTPUT_COLUMNS = ("prompt", "chosen", "rejected", "chosen_score", "rejected_score", "margin")


@dataclass
class PairMiningStats:
    """What ``build_preference_pairs`` kept and dropped."""

    num_prompts: int = 0
    num_pairs: int = 0
    num_dropped_prompts: int = 0  # prompts without contrast (all scores equal, or no correct/incorrect completion)
    num_unscored_completions: int = 0  # every reward function returned None


def select_pairs(
    scores: Sequence[float], strategy: str, correct_threshold: float = 1.0, max_pairs: int = 1
) -> list[tuple[int, int]]:
    """(chosen, rejected) indices into one prompt's scores (NaN = unscored, never paired); [] without contrast.

    ``best_vs_worst``: the first highest against the first lowest score, if they differ. ``correct_vs_incorrect``:
    a completion is correct iff its score >= ``correct_threshold``; correct ones by descending score are paired
    with incorrect ones by ascending score, each completion used once, at most ``max_pairs`` pairs.
    """
    valid = [i for i, score in enumerate(scores) if not math.isnan(score)]
    if strategy == "best_vs_worst":
        if not valid:
            return []
        best = max(valid, key=lambda i: scores[i])
        worst = min(valid, key=lambda i: scores[i])
        return [(best, worst)] if scores[best] > scores[worst] else []
    if strategy == "correct_vs_incorrect":
        correct = sorted((i for i in valid if scores[i] >= correct_threshold), key=lambda i: -scores[i])
        incorrect = sorted((i for i in valid if scores[i] < correct_threshold), key=lambda i: scores[i])
        return list(zip(correct, incorrect))[:max_pairs]
    raise ValueError(f"Unknown `strategy`={strategy!r}; expected one of {', '.join(map(repr, STRATEGIES))}.")


def build_preference_pairs(
    model: str | PreTrainedModel,
    dataset: Dataset,
    reward_funcs: RewardFunc | Sequence[RewardFunc],
    num_samples: int = 4,
    *,
    processing_class: PreTrainedTokenizerBase | None = None,
    strategy: str = "best_vs_worst",
    reward_weights: Sequence[float] | None = None,
    correct_threshold: float = 1.0,
    max_pairs_per_prompt: int = 1,
    margin_scale: float = 1.0,
    gold_columns: str | Sequence[str] | None = None,
    batch_size: int = 8,
    max_new_tokens: int = 256,
    temperature: float = 1.0,
    generation_kwargs: dict[str, Any] | None = None,
    seed: int | None = None,
    show_progress: bool = True,
    return_stats: bool = False,
) -> Dataset | tuple[Dataset, PairMiningStats]:
    """Sample ``num_samples`` completions per prompt with ``model``, score them with ``reward_funcs``, pair them.

    Args:
        model: a causal LM or its path; ``processing_class`` defaults to the tokenizer saved with a path.
        dataset: a ``prompt`` column (text, or a list of chat messages) and whatever the reward functions read
            (gold answers, tests), which they receive as keyword arguments, one value per completion, as in TRL.
        reward_funcs: TRL-protocol reward callables; their outputs are summed with ``reward_weights`` (default
            1 each); a completion that every function scores None is never paired.
        strategy: ``"best_vs_worst"`` (one pair per prompt) or ``"correct_vs_incorrect"`` (score >=
            ``correct_threshold`` is correct; up to ``max_pairs_per_prompt`` disjoint pairs), see ``select_pairs``.
        margin_scale: the ``margin`` column is ``margin_scale * (chosen_score - rejected_score)``. trl_ext's
            DPOTrainer trains with it (−log σ(β·Δ − margin)); pass 0 (or drop the column) for plain DPO.
        gold_columns: columns the reward functions need; a row where one is missing or empty raises a ValueError
            naming the row index.
        batch_size: prompts per ``generate`` call (each yields ``num_samples`` sequences).
        generation_kwargs: extra ``generate`` arguments (``top_p``, ``top_k``, ...).
        seed: seeds torch's global RNG before sampling, for reproducible pairs.
        return_stats: also return a ``PairMiningStats``; the number of dropped prompts is logged either way.

    Prompts without contrast are dropped and counted. Returns a ``Dataset`` with ``prompt``, ``chosen``,
    ``rejected``, ``chosen_score``, ``rejected_score``, ``margin`` and the prompt row's other columns; chosen and
    rejected are text for text prompts and ``[{"role": "assistant", ...}]`` for conversational ones.
    """
    funcs = [reward_funcs] if callable(reward_funcs) else list(reward_funcs)
    weights = torch.tensor([1.0] * len(funcs) if reward_weights is None else list(reward_weights), dtype=torch.float)
    _validate(dataset, funcs, weights, num_samples, strategy, gold_columns, batch_size)
    if isinstance(model, str):
        processing_class = processing_class or AutoTokenizer.from_pretrained(model)
        model = AutoModelForCausalLM.from_pretrained(model)
    if processing_class is None:
        raise ValueError("Pass `processing_class` (the tokenizer) when `model` is a model instance, not a path.")
    if processing_class.pad_token is None:  # as TRL does: batched generation needs a pad token
        processing_class.pad_token = processing_class.eos_token
    if seed is not None:
        torch.manual_seed(seed)
    generation = dict(max_new_tokens=max_new_tokens, temperature=temperature, **(generation_kwargs or {}))
    pick = partial(
        select_pairs, strategy=strategy, correct_threshold=correct_threshold, max_pairs=max_pairs_per_prompt
    )
    stats, rows = PairMiningStats(num_prompts=len(dataset)), []
    with tqdm(total=len(dataset), desc="Mining preference pairs", disable=not show_progress) as progress:
        for start in range(0, len(dataset), batch_size):
            batch = dataset[start : start + batch_size]  # dict of column -> list
            completions, completion_ids = _sample(model, processing_class, batch["prompt"], num_samples, generation)
            scores = _score(funcs, weights, batch, completions, completion_ids, num_samples)
            stats.num_unscored_completions += sum(math.isnan(score) for score in scores)
            rows += _pair_rows(batch, completions, scores, num_samples, pick, margin_scale, stats)
            progress.update(len(batch["prompt"]))
    _log_stats(stats)
    columns = [*OUTPUT_COLUMNS, *(name for name in dataset.column_names if name != "prompt")]
    pairs = Dataset.from_dict({name: [row[name] for row in rows] for name in columns})
    return (pairs, stats) if return_stats else pairs


def _validate(dataset, funcs, weights, num_samples, strategy, gold_columns, batch_size) -> None:
    if "prompt" not in dataset.column_names:
        raise ValueError(f"The prompt dataset needs a `prompt` column; it has {dataset.column_names}.")
    clashes = [name for name in OUTPUT_COLUMNS[1:] if name in dataset.column_names]
    if clashes:
        raise ValueError(f"The prompt dataset already has the output column(s) {clashes}; rename or remove them.")
    if not funcs or not all(callable(func) and not isinstance(func, torch.nn.Module) for func in funcs):
        raise TypeError(
            "`reward_funcs` must be a TRL-protocol reward callable `f(completions, **columns) -> list[float | None]` "
            "or a non-empty sequence of them (a reward model must be wrapped in such a function)."
        )
    if weights.shape != (len(funcs),):
        raise ValueError(f"`reward_weights` has {weights.numel()} entries for {len(funcs)} reward functions.")
    if num_samples < 2:
        raise ValueError(f"`num_samples` must be >= 2 to form a pair, got {num_samples}.")
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown `strategy`={strategy!r}; expected one of {', '.join(map(repr, STRATEGIES))}.")
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1, got {batch_size}.")
    gold_columns = [gold_columns] if isinstance(gold_columns, str) else list(gold_columns or [])
    missing = [name for name in gold_columns if name not in dataset.column_names]
    if missing:
        raise ValueError(f"Gold column(s) {missing} are not in the prompt dataset (columns {dataset.column_names}).")
    for name in gold_columns:
        for index, value in enumerate(dataset[name]):
            if value is None or (hasattr(value, "__len__") and len(value) == 0):
                raise ValueError(f"Row {index}: the gold column `{name}` is missing or empty ({value!r}).")


@torch.no_grad()
def _sample(model, tokenizer, prompts: list, num_samples: int, generation: dict) -> tuple[list, list[list[int]]]:
    """``num_samples`` completions per prompt, grouped by prompt; text, or an assistant message for chat prompts."""
    conversational = isinstance(prompts[0], list)
    if conversational:
        texts = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
    else:
        texts = prompts
    encoded = tokenizer(
        texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=not conversational
    ).to(model.device)
    was_training = model.training
    model.eval()
    output = model.generate(
        **encoded,
        do_sample=True,
        num_return_sequences=num_samples,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **generation,
    )
    model.train(was_training)
    completion_ids = [
        _until_eos(ids, tokenizer.eos_token_id) for ids in output[:, encoded["input_ids"].shape[1] :].tolist()
    ]
    completions = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    if conversational:
        completions = [[{"role": "assistant", "content": text}] for text in completions]
    return completions, completion_ids


def _until_eos(ids: list[int], eos_token_id: int | None) -> list[int]:
    """Token ids up to and including the first EOS (the padding after it dropped)."""
    return ids[: ids.index(eos_token_id) + 1] if eos_token_id in ids else ids


def _score(funcs, weights, batch: dict, completions: list, completion_ids: list, num_samples: int) -> list[float]:
    """The weighted reward of every completion (NaN when every function returned None), as TRL computes it."""
    repeat = {name: [value for value in values for _ in range(num_samples)] for name, values in batch.items()}
    prompts = repeat.pop("prompt")
    per_func = torch.full((len(completions), len(funcs)), float("nan"))
    for f, func in enumerate(funcs):
        outputs = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **repeat)
        name = getattr(func, "__name__", type(func).__name__)
        if len(outputs) != len(completions):
            raise ValueError(
                f"Reward function {name} returned {len(outputs)} rewards for {len(completions)} completions."
            )
        per_func[:, f] = torch.tensor([float("nan") if r is None else float(r) for r in outputs])
    return combine_rewards(per_func, weights).tolist()


def _pair_rows(batch: dict, completions, scores, num_samples, pick, margin_scale, stats) -> list[dict]:
    rows = []
    for p in range(len(batch["prompt"])):
        group = slice(p * num_samples, (p + 1) * num_samples)
        group_completions, group_scores = completions[group], scores[group]
        selected = pick(group_scores)
        if not selected:
            stats.num_dropped_prompts += 1
        for chosen, rejected in selected:
            row = {name: values[p] for name, values in batch.items()}
            row.update(
                chosen=group_completions[chosen],
                rejected=group_completions[rejected],
                chosen_score=group_scores[chosen],
                rejected_score=group_scores[rejected],
                margin=margin_scale * (group_scores[chosen] - group_scores[rejected]),
            )
            rows.append(row)
    stats.num_pairs += len(rows)
    return rows


def _log_stats(stats: PairMiningStats) -> None:
    logger.info("Mined %d preference pairs from %d prompts.", stats.num_pairs, stats.num_prompts)
    if stats.num_dropped_prompts:
        logger.warning(
            "Dropped %d of %d prompts without contrast (no pair of differently scored completions).",
            stats.num_dropped_prompts,
            stats.num_prompts,
        )
