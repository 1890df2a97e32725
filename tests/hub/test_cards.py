"""The card template lives in the top-level model_cards/ and ships in the wheel; the example cards re-render."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CARDS = ROOT / "model_cards"
RENDER_SNIPPET = """
import json, sys
from trl_ext.hub import CARD_TEMPLATE, render_model_card
context = json.loads(sys.argv[1])
print(CARD_TEMPLATE)
print(render_model_card(context).content)
"""


def test_template_is_in_the_top_level_folder():
    assert (CARDS / "trl_ext_card.md").is_file()
    assert (ROOT / "trl_ext" / "model_cards" / "trl_ext_card.md").resolve() == (CARDS / "trl_ext_card.md").resolve()


def _source_copy(destination: Path) -> Path:
    """The files a build reads, copied (links kept) so that the build leaves nothing in the checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("trl_ext", "model_cards"):
        shutil.copytree(ROOT / name, destination / name, symlinks=True, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, destination / name)
    return destination


def test_non_editable_install_renders_cards(tmp_path):
    target = tmp_path / "site"
    source = _source_copy(tmp_path / "source")
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
               "--target", str(target), str(source)]  # fmt: skip
    subprocess.run(install, check=True, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    context = {"model_name": "m", "recipe": "DAPO", "paper_id": "2503.14476", "citation": None, "trl_citation": "",
               "base_model": None, "base_model_text": "a local model", "datasets": [], "datasets_text": "d",
               "reward_text": "r", "load_id": "m", "has_critic": False, "hyperparameters": [["beta", 0.0]],
               "final_metrics": [], "reset_steps": [], "tags": ["trl"], "versions": {"trl": "1.16"}}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, "-c", RENDER_SNIPPET, json.dumps(context)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    template_path, card = result.stdout.split("\n", 1)
    assert Path(template_path).resolve().is_relative_to(target.resolve())  # the installed copy, not the checkout
    assert "trained with **DAPO** ([arXiv 2503.14476]" in card and "| `beta` | `0.0` |" in card


EXAMPLES = sorted(path.parent for path in CARDS.glob("*/card_context.json"))


@pytest.mark.parametrize("folder", EXAMPLES, ids=lambda p: p.name)
def test_example_card_matches_its_rendering(folder):
    from trl_ext.hub import render_model_card

    context = json.loads((folder / "card_context.json").read_text())
    assert render_model_card(context).content == (folder / "README.md").read_text()
    assert context["paper_id"] and f"arxiv.org/abs/{context['paper_id']}" in (folder / "README.md").read_text()
    assert (folder / context["plot_file"]).is_file()


def test_hyperparameter_table_leaves_out_switched_off_features():
    import trl_ext
    from trl_ext.hub import changed_hyperparameters

    def names(config):
        return {name for name, _ in changed_hyperparameters(config)}

    no_resets = names(trl_ext.DAPOConfig(output_dir="unused", use_cpu=True))
    assert not {n for n in no_resets if n.startswith("ref_reset") or n == "reset_optimizer"}
    assert {"dynamic_sampling", "dynamic_sampling_max_rounds", "overlong_penalty_factor"} <= no_resets
    interval = names(trl_ext.ProRLConfig(output_dir="unused", use_cpu=True, ref_reset_steps=5))
    assert {"ref_reset_steps", "reset_optimizer"} <= interval and "ref_reset_patience" not in interval
    plain = names(trl_ext.GRPOConfig(output_dir="unused", use_cpu=True))
    assert not {n for n in plain if n.startswith(("dynamic_sampling", "overlong_", "ref_reset"))}


def test_there_is_one_example_card_per_rl_recipe():
    assert {folder.name for folder in EXAMPLES} >= {"dapo", "dr_grpo", "rloo", "prorl", "magistral", "ppo"}
