"""Model cards, training plots and Hub uploads.

trl_ext renders its own card instead of TRL's (TRL resolves its template inside the trl package and
writes "fine-tuned version of None" for local base models). Trainers get it through ``ModelCardMixin``, which
overrides the public ``create_model_card`` that Trainer calls at checkpoints and in ``push_to_hub``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, HfApi, ModelCard, ModelCardData

from trl_ext.trainers._trl_hooks import CompleteCheckpointPushMixin

CARD_TEMPLATE = files("trl_ext") / "model_cards" / "trl_ext_card.md"
PLOT_FILE = "training_curves.png"
EVAL_RESULTS_FILE = "eval_results.json"
PLOTTED_METRICS = ("reward", "kl", "completions/mean_length")
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


class HubPushError(RuntimeError):
    """A push to the Hub failed; the local output directory was not modified."""


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


def plot_training_curves(log_history: list[dict[str, Any]], path: str | os.PathLike) -> bool:
    """Write a PNG of reward, KL and completion length against the step; False if nothing was logged."""
    series = {key: [(e["step"], e[key]) for e in log_history if isinstance(e.get(key), int | float) and "step" in e]
              for key in PLOTTED_METRICS}  # fmt: skip
    series = {key: points for key, points in series.items() if points}
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(series), figsize=(4.2 * len(series), 3.2), squeeze=False)
    for axis, (key, points) in zip(axes[0], series.items(), strict=True):
        axis.plot(*zip(*points, strict=True), marker="." if len(points) < 50 else None)
        axis.set_title(key)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def versions() -> dict[str, str]:
    found = {}
    for name in ("trl_ext", "trl", "transformers", "torch", "datasets", "accelerate"):
        distribution = "trl-ext" if name == "trl_ext" else name
        try:
            found[name] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


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
    paper = getattr(trainer, "_paper", {}) or {}
    reward_names = list(getattr(trainer, "reward_func_names", []) or [])
    bookkeeping = getattr(trainer, "reset_bookkeeping", None)
    model_name = model_name or Path(args.output_dir).name
    return {
        "model_name": model_name,
        "recipe": getattr(trainer, "_name", type(trainer).__name__),
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
        "tags": sorted(set(getattr(trainer, "_tag_names", [])) | {"trl", "trl_ext"} | set(_as_list(tags))),
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
    context["plot_file"] = PLOT_FILE if _try_plot(trainer.state.log_history, output_dir / PLOT_FILE) else None
    card = render_model_card(context, load_eval_results(output_dir))
    path = output_dir / "README.md"
    card.save(path)
    return path


def _try_plot(log_history: list[dict[str, Any]], path: Path) -> bool:
    try:
        return plot_training_curves(log_history, path)
    except ImportError:  # matplotlib is the optional `plot` extra
        return False


# Never uploaded from the top level of an output directory: checkpoints (only with include_checkpoints, each in its
# own commit), DeepSpeed shards and optimizer/RNG states (they belong inside checkpoints), and "_*" as Trainer does.
TOP_LEVEL_IGNORE = ["checkpoint-*", "global_step*", "latest", "zero_to_fp32.py", "optimizer.pt", "scheduler.pt",
                    "scaler.pt", "rng_state*.pth", "critic_optimizer.pt", "critic_scheduler.pt", "_*"]  # fmt: skip


def checkpoint_folders(output_dir: str | os.PathLike) -> list[Path]:
    """The ``checkpoint-<step>`` folders of an output directory, oldest first."""
    found = [p for p in Path(output_dir).glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def push_folder(
    output_dir: str | os.PathLike,
    repo_id: str,
    token: str | None = None,
    private: bool | None = None,
    commit_message: str = "Upload with trl_ext",
    include_checkpoints: bool = False,
) -> str:
    """Upload a training output directory (model, tokenizer, critic/, card, plot, logs) to the Hub.

    Checkpoints go up only with ``include_checkpoints``, one commit each, as ``<repo>/checkpoint-<step>/`` with
    everything a resume needs. Raises HubPushError with the reason (no token, no network, permissions) and leaves
    every local file as it was.
    """
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        raise HubPushError(f"Nothing to push: `{output_dir}` is not a directory.")
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True)
        commit = api.upload_folder(
            folder_path=str(output_dir), repo_id=repo_id, commit_message=commit_message,
            ignore_patterns=TOP_LEVEL_IGNORE,
        )  # fmt: skip
        for checkpoint in checkpoint_folders(output_dir) if include_checkpoints else []:
            api.upload_folder(
                folder_path=str(checkpoint), path_in_repo=checkpoint.name, repo_id=repo_id,
                commit_message=f"{commit_message}: {checkpoint.name}",
            )  # fmt: skip
    except Exception as error:  # the hub client raises many types (HTTP, offline mode, auth, OS errors)
        raise HubPushError(
            f"Could not push `{output_dir}` to the Hub repo `{repo_id}`: {type(error).__name__}: {error}. "
            "The local output is intact; check your token (`hf auth login` or HF_TOKEN), your network and "
            "HF_HUB_OFFLINE, then run `trl-ext push` again."
        ) from error
    return str(getattr(commit, "commit_url", commit))


class ModelCardMixin(CompleteCheckpointPushMixin):
    """Replaces TRL's model card with trl_ext's wherever Trainer writes one (checkpoints, push_to_hub), and uploads
    a checkpoint only once every trl_ext file of it is written (see ``CompleteCheckpointPushMixin``)."""

    def create_model_card(
        self, model_name: str | None = None, dataset_name: str | None = None, tags: str | list[str] | None = None
    ) -> None:
        if not self.is_world_process_zero():
            return
        write_model_card(self, model_name=model_name, dataset_name=dataset_name, tags=tags)
