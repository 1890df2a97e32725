"""Evaluation results (``eval_results.json``, written by `trl-ext eval`) in a model card's metadata."""

from __future__ import annotations

import json
import os
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard

EVAL_RESULTS_FILE = "eval_results.json"


def load_eval_results(output_dir: str | os.PathLike) -> list[EvalResult]:
    path = Path(output_dir) / EVAL_RESULTS_FILE
    if not path.exists():
        return []
    return [EvalResult(**row) for row in json.loads(path.read_text())]


def add_eval_results_to_card(output_dir: str | os.PathLike) -> Path | None:
    """Put ``eval_results.json`` into the metadata (model-index) of an existing card; None when there is no card."""
    path = Path(output_dir) / "README.md"
    results = load_eval_results(output_dir)
    if not path.exists() or not results:
        return None
    card = ModelCard.load(path)
    card.data.eval_results = results
    card.data.model_name = card.data.model_name or Path(output_dir).resolve().name
    card.save(path)
    return path
