"""Model cards: trl_ext renders its own card instead of TRL's (TRL resolves its template inside the trl package and
writes "fine-tuned version of None" for local base models). Trainers get it through ``ModelCardMixin``, which
overrides the public ``create_model_card`` that Trainer calls at checkpoints and in ``push_to_hub``.
"""

from __future__ import annotations

import dataclasses
import os
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from trl_ext.hub.eval_results import load_eval_results
from trl_ext.hub.plots import PLOT_FILE, try_plot

CARD_TEMPLATE = files("trl_ext") / "model_cards" / "trl_ext_card.md"
SUMMARY_METRICS = ("reward", "reward_std", "kl", "entropy", "completions/mean_length", "ref_reset/resets",
                   "dynamic_sampling/rounds", "dynamic_sampling/informative_fraction",
                   "dynamic_sampling/filled_uninformative", "ppo/value_loss", "ppo/explained_variance", "loss")  # fmt: skip
# Settings that describe where or how a run was launched, not the algorithm.
NOT_HYPERPARAMETERS = {
    "output_dir", "logging_dir", "run_name", "report_to", "push_to_hub", "hub_model_id", "hub_token", "hub_strategy",
    "hub_private_repo", "resume_from_checkpoint", "overwrite_output_dir", "deepspeed", "accelerator_config",
    "disable_tqdm", "use_cpu", "local_rank", "ddp_backend", "logging_steps", "save_steps", "save_strategy",
    "eval_steps", "dataloader_num_workers", "log_completions", "trackio_space_id", "project", "debug",
    "dataloader_pin_memory",
}  # fmt: skip
TRL_CITATION = """@software{vonwerra2020trl,
  title   = {{TRL: Transformers Reinforcement Learning}},
  author  = {von Werra, Leandro and Belkada, Younes and Tunstall, Lewis and Beeching, Edward and Thrush, Tristan and Lambert, Nathan and Huang, Shengyi and Rasul, Kashif and Gallou{\\'e}dec, Quentin},
  year    = 2020,
  url     = {https://github.com/huggingface/trl}
}"""


def changed_hyperparameters(args: Any) -> list[tuple[str, Any]]:
    """Config fields whose value differs from the default of the TRL config class the trainer config extends.

    Fields trl_ext adds on top of TRL are listed when they are set (not None/False), except the knobs of a feature
    the run has switched off (reset fields without a reset trigger, dynamic-sampling fields without dynamic sampling,
    overlong fields without the soft overlong punishment).
    """
    trl_base = next((cls for cls in type(args).__mro__ if cls.__module__.startswith("trl.")), type(args))
    trl_defaults = {f.name: _field_default(f) for f in dataclasses.fields(trl_base)}
    rows = []
    for field in dataclasses.fields(args):
        if field.name in NOT_HYPERPARAMETERS or field.name.startswith("_") or _switched_off(args, field.name):
            continue
        value = getattr(args, field.name, None)
        if field.name in trl_defaults:
            if value is not None and value != trl_defaults[field.name] and not callable(value):
                rows.append((field.name, value))
        elif value not in (None, False):
            rows.append((field.name, value))
    return sorted(rows)


# trl_ext knobs by the switch that turns their feature on: (field-name prefixes, switch)
FEATURE_SWITCHES = (
    (("ref_reset_metric_", "ref_reset_patience", "ref_reset_min_delta"), "ref_reset_metric"),
    (("ref_reset_", "reset_optimizer"), "reference_resets_enabled"),
    (("prompt_skipping_",), "prompt_skipping"),
    (("dynamic_sampling_",), "dynamic_sampling"),
    (("overlong_",), "soft_overlong_punishment"),
)


def _switched_off(args: Any, name: str) -> bool:
    return any(name.startswith(prefixes) and not getattr(args, switch, True) for prefixes, switch in FEATURE_SWITCHES)


def _field_default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def final_metrics(log_history: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """The last logged value of each summary metric (training logs only)."""
    last: dict[str, float] = {}
    for entry in log_history:
        for key in SUMMARY_METRICS:
            if isinstance(entry.get(key), int | float):
                last[key] = entry[key]
    return [(key, round(float(value), 4)) for key, value in last.items()]


def versions() -> dict[str, str]:
    found = {}
    for name in ("trl_ext", "trl", "transformers", "torch", "datasets", "accelerate"):
        distribution = "trl-ext" if name == "trl_ext" else name
        try:
            found[name] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def _base_model(model_id: str | None) -> tuple[str | None, str]:
    """(Hub id for the card metadata or None, text for the card). A local path is named as such, never None."""
    if not model_id:
        return None, "a model built in memory (no name or path)"
    if os.path.isdir(model_id):
        return None, f"a local model at `{model_id}`"
    return model_id, f"[{model_id}](https://huggingface.co/{model_id})"


def _as_list(value: str | list[str] | None) -> list[str]:
    if not value:
        return []
    return [value] if isinstance(value, str) else list(value)


def _dataset_names(trainer: Any, dataset_name: str | list[str] | None) -> list[str]:
    if dataset_name:
        return _as_list(dataset_name)
    info = getattr(getattr(trainer, "train_dataset", None), "info", None)
    name = getattr(info, "dataset_name", None)
    return [name] if name else []


def card_context(
    trainer: Any,
    model_name: str | None = None,
    dataset_name: str | list[str] | None = None,
    tags: str | list[str] | None = None,
) -> dict[str, Any]:
    """Everything the card template shows, read from a trainer after (or during) training."""
    from trl.trainer.utils import get_config_model_id

    args = trainer.args
    base_model, base_text = _base_model(get_config_model_id(trainer.model.config))
    datasets = _dataset_names(trainer, dataset_name)
    recipe = getattr(trainer, "recipe_card", None)  # trl_ext's trainers name themselves; any other: its class
    paper = dict(getattr(recipe, "paper", {}) or {})
    reward_names = list(getattr(trainer, "reward_func_names", []) or [])
    bookkeeping = getattr(trainer, "reset_bookkeeping", None)
    model_name = model_name or Path(args.output_dir).name
    return {
        "model_name": model_name,
        "recipe": getattr(recipe, "name", type(trainer).__name__),
        "paper_id": paper.get("id"),
        "citation": paper.get("citation"),
        "trl_citation": TRL_CITATION,
        "base_model": base_model,
        "base_model_text": base_text,
        "datasets": datasets,
        "datasets_text": ", ".join(datasets) if datasets else "a local or in-memory dataset",
        "reward_text": ", ".join(f"`{name}`" for name in reward_names) or "none (not an RL run)",
        "load_id": args.hub_model_id or args.output_dir,
        "has_critic": os.path.isdir(os.path.join(args.output_dir, "critic")),
        "hyperparameters": changed_hyperparameters(args),
        "final_metrics": final_metrics(trainer.state.log_history),
        "reset_steps": list(bookkeeping.reset_steps) if bookkeeping else [],
        "tags": sorted(set(getattr(recipe, "tags", ())) | {"trl", "trl_ext"} | set(_as_list(tags))),
        "versions": versions(),
    }


def render_model_card(context: dict[str, Any], eval_results: list[EvalResult] | None = None) -> ModelCard:
    """Render the trl_ext card template into a huggingface_hub ModelCard with valid metadata."""
    card_data = ModelCardData(
        base_model=context["base_model"],
        datasets=context["datasets"] or None,
        library_name="transformers",
        tags=context["tags"],
        model_name=context["model_name"],
        eval_results=eval_results or None,
    )
    eval_rows = [vars(result) for result in eval_results or []]
    return ModelCard.from_template(card_data, template_path=str(CARD_TEMPLATE), eval_rows=eval_rows, **context)


def write_model_card(
    trainer: Any,
    output_dir: str | None = None,
    model_name: str | None = None,
    dataset_name: str | list[str] | None = None,
    tags: str | list[str] | None = None,
) -> Path:
    """Write README.md (the card) and the training-curve plot into ``output_dir`` (default: args.output_dir)."""
    output_dir = Path(output_dir or trainer.args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    context = card_context(trainer, model_name=model_name, dataset_name=dataset_name, tags=tags)
    context["plot_file"] = PLOT_FILE if try_plot(trainer.state.log_history, output_dir / PLOT_FILE) else None
    card = render_model_card(context, load_eval_results(output_dir))
    path = output_dir / "README.md"
    card.save(path)
    return path


class ModelCardMixin:
    """Replaces TRL's model card with trl_ext's wherever Trainer writes one (checkpoints, push_to_hub)."""

    def create_model_card(
        self, model_name: str | None = None, dataset_name: str | None = None, tags: str | list[str] | None = None
    ) -> None:
        if not self.is_world_process_zero():
            return
        write_model_card(self, model_name=model_name, dataset_name=dataset_name, tags=tags)
