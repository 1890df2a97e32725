"""The shipped recipes that generate with vLLM (`use_vllm: true`, colocate) run as shipped with a real engine:
`trl-ext <recipe> --config examples/recipes/<recipe>.yaml`, two steps on the tiny model, the recipe's own vLLM
settings kept. The trained completions are the engine's and the engine holds the trainer's weights at every
generation (the recipes' learning rates are too small for an update to show in the engine's dtype, so the
engine-changed check of test_colocate.py is left out here)."""

from __future__ import annotations

import pytest
import yaml

from tests.test_recipes_as_shipped import RECIPE_DIR, run_as_shipped
from tests.vllm._engine import EngineWatch
from trl_ext.recipes import recipe_classes

pytestmark = pytest.mark.vllm

VLLM_RECIPES = sorted(p.stem for p in RECIPE_DIR.glob("*.yaml") if yaml.safe_load(p.read_text()).get("use_vllm"))
STEPS = 2


def test_the_vllm_recipes_are_found():
    assert {"dapo", "dr_grpo", "prorl"} <= set(VLLM_RECIPES)


@pytest.mark.parametrize("recipe", VLLM_RECIPES)
def test_recipe_as_shipped_generates_with_vllm(recipe, vllm_model_paths, engines, tmp_path, monkeypatch):
    _, trainer_cls = recipe_classes(recipe)
    watches = []
    real_train = trainer_cls.train

    def watched_train(self, *args, **kwargs):
        watches.append(EngineWatch(self))
        try:
            return real_train(self, *args, **kwargs)
        finally:
            watches[-1].close()

    monkeypatch.setattr(trainer_cls, "train", watched_train)
    monkeypatch.chdir(tmp_path)
    run_as_shipped(recipe, vllm_model_paths, tmp_path, steps=STEPS, use_vllm=True)
    (watch,) = watches
    assert watch.trainer.args.use_vllm and watch.trainer.args.vllm_mode == "colocate"
    watch.assert_trained_on_engine_completions()
    watch.assert_weights_equal_at_every_generation(STEPS, updates_visible=False)
    watch.assert_one_push_per_step(STEPS)
