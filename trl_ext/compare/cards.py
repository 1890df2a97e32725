"""The example model card of a comparison's seed-0 run of each recipe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trl_ext.compare.settings import CompareSettings


def write_example_card(trainer: Any, recipe: str, folder: Path, settings: CompareSettings) -> Path:
    """Seed 0's model, then its card in ``folder``: card_context.json (what was rendered), README.md, the plot."""
    from trl_ext.hub import PLOT_FILE as CARD_PLOT
    from trl_ext.hub import card_context, plot_training_curves, render_model_card

    trainer.save_model(trainer.args.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    dataset = settings.dataset_name or "trl_ext/arithmetic (built in)"
    context = card_context(trainer, model_name=f"{Path(settings.output_dir).name}-{recipe}", dataset_name=dataset)
    context["plot_file"] = CARD_PLOT if plot_training_curves(trainer.state.log_history, folder / CARD_PLOT) else None
    context = json.loads(json.dumps(context, default=_plain))  # what the JSON file holds is what is rendered
    (folder / "card_context.json").write_text(json.dumps(context, indent=1) + "\n")
    (folder / "README.md").write_text(render_model_card(context).content)
    return folder / "README.md"


def _plain(value: Any) -> Any:
    """JSON form of a config value: an enum's value (SchedulerType.CONSTANT -> "constant"), else its text."""
    return (
        getattr(value, "value", None) if isinstance(getattr(value, "value", None), str | int | float) else str(value)
    )
