"""The layout rules the README states hold for the code: no import circle (imports inside functions and importlib
string imports counted), old import paths of moved names still work, and ``import trl_ext`` stays light."""

import importlib
import subprocess
import sys

import pytest

from tests.import_graph import circles, module_graph, part_graph

# one xdist worker runs them all: the source scans (tests/import_graph.py, tests/private_touches.py) are read once
pytestmark = pytest.mark.xdist_group("layout")


def test_the_import_graph_sees_function_level_and_importlib_imports(tmp_path):
    graph = module_graph()
    assert "trl_ext.cli.launch" in graph["trl_ext.cli"]  # imported inside main()
    assert "trl_ext.cli.demo" in graph["trl_ext.cli"]  # imported inside _command()
    assert "trl_ext.rewards" in graph["trl_ext.cli.train"]  # importlib.import_module("trl_ext.rewards")


def test_circles_are_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_modules():
    assert circles(module_graph()) == []


def test_no_import_circle_between_first_level_parts():
    assert circles(part_graph()) == []


def test_core_imports_no_other_part():
    assert part_graph()["core"] == set()


OLD_PATHS = {
    "trl_ext.cli": ["ScriptArguments", "load_any_dataset", "resolve_reward", "train", "main", "RECIPES",
                    "recipe_classes", "DATA_FILE_BUILDERS"],
    "trl_ext.launch": ["ACCELERATE_CONFIGS", "accelerate_config_path", "accelerate_launch_args", "launch"],
    "trl_ext.hub": ["ModelCardMixin", "HubPushError", "card_context", "changed_hyperparameters", "final_metrics",
                    "plot_training_curves", "push_folder", "render_model_card", "write_model_card",
                    "add_eval_results_to_card", "load_eval_results", "checkpoint_folders", "CARD_TEMPLATE",
                    "PLOT_FILE", "EVAL_RESULTS_FILE"],
    "trl_ext.compare": ["CompareSettings", "CompareError", "add_compare_arguments", "compare_from_args", "run_compare",
                        "train_one", "recipe_args", "summarise", "write_table", "plot_comparison", "write_example_card",
                        "parse_recipes", "validate", "COMPARE_RECIPES", "ACCURACY_KEY"],
    "trl_ext.resets": ["copy_policy_to_reference", "reset_optimizer_state", "save_reference", "load_reference",
                       "gathered_parameters", "optimizer_chain", "adapter_pairs", "REFERENCE_DIR", "REFERENCE_INDEX"],
    "trl_ext.callbacks": ["ReferenceResetCallback", "ResetBookkeeping", "RESET_STATE_FILE"],
    "trl_ext.trainers.reference_resets": ["ReferenceResetArguments", "ReferenceResetMixin"],
    "trl_ext.trainers.grpo": ["GRPOConfig", "GRPOTrainer", "is_shaping_reward", "DYNAMIC_SAMPLING_STATE_FILE"],
    "trl_ext.trainers.ppo": ["PPOConfig", "PPOTrainer", "TokenValueModel", "load_value_model", "CRITIC_DIR"],
    "trl_ext.trainers._trl_hooks": ["GRPO_HOOKS", "check_trl_hooks", "require_trl_hooks", "checkpoint_dir",
                                    "GRPOHookMixin", "CompleteCheckpointPushMixin", "Rollout"],
    "trl_ext.recipes": ["RECIPES", "recipe_classes"],
    "trl_ext.demo": ["run_demo", "warm_start", "measure", "task_reward", "DEMO_RECIPES"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(OLD_PATHS))
def test_old_import_paths_still_work(module):
    loaded = importlib.import_module(module)
    missing = [name for name in OLD_PATHS[module] if not hasattr(loaded, name)]
    assert missing == []


def test_import_trl_ext_is_light():
    code = (
        "import sys, trl_ext; heavy = [m for m in ('torch', 'trl', 'transformers', 'datasets', 'accelerate') "
        "if m in sys.modules]; print(heavy); assert not heavy, heavy; trl_ext.__version__"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_cli_and_sandbox_serve_start_without_the_training_stack():
    """`trl-ext sandbox-serve` (an execution node, also started by the sandbox tests) and the CLI's parser import
    neither torch nor transformers, datasets, trl or accelerate; the training names of `trl_ext.cli` and
    `trl_ext.data` still resolve (on first use)."""
    code = (
        "import sys, trl_ext.cli, trl_ext.cli.serve, trl_ext.sandbox.server; trl_ext.cli.command_parser(); "
        "heavy = [m for m in ('torch', 'trl', 'transformers', 'datasets', 'accelerate') if m in sys.modules]; "
        "print(heavy); assert not heavy, heavy; "
        "from trl_ext.cli import train, load_any_dataset; from trl_ext.data import build_preference_pairs; "
        "assert callable(train) and callable(load_any_dataset) and 'torch' in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_file_in_the_package_is_over_450_lines():
    from tests.import_graph import modules

    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > 450}
    assert long == {}


def test_the_recipe_registry_is_what_the_package_and_the_cli_expose():
    import trl_ext
    from trl_ext.cli.parser import command_parser
    from trl_ext.recipes import REGISTRY, recipe_classes

    for name, recipe in REGISTRY.items():
        config_cls, trainer_cls = recipe_classes(name)
        assert getattr(trl_ext, recipe.config) is config_cls and getattr(trl_ext, recipe.trainer) is trainer_cls
    assert set(trl_ext.__all__) == {n for r in REGISTRY.values() for n in (r.config, r.trainer)} | {"__version__"}
    commands = command_parser()._subparsers._group_actions[0].choices
    assert set(REGISTRY) <= set(commands)


def test_the_registry_points_down_the_graph():
    """The registry names its trainer modules as strings (imported on first use); those modules must not import
    the registry or its readers back, or the circle would only be hidden from the graph."""
    from trl_ext.recipes import REGISTRY

    graph = module_graph()
    readers = {"trl_ext", "trl_ext.recipes", "trl_ext.demo"} | {m for m in graph if m.startswith(("trl_ext.cli",
                                                                                                  "trl_ext.compare"))}  # fmt: skip
    for recipe in REGISTRY.values():
        assert recipe.module in graph
        reachable, todo = set(), [recipe.module]
        while todo:
            for target in graph[todo.pop()] - reachable:
                reachable.add(target)
                todo.append(target)
        assert not reachable & readers, (recipe.name, sorted(reachable & readers))


def test_every_private_trl_touch_lives_in_a_trl_module():
    """Every override or super() call of a TRL/transformers private method and every read or write of a private
    attribute of theirs is in a trainers/_trl* module (tests/private_touches.py says what counts)."""
    from tests.private_touches import attribute_touches, is_trl_module, overrides, own_private_names
    from tests.private_touches import third_party_private_names as private_names

    third_party = private_names()
    touches = overrides() + attribute_touches(third_party, own_private_names(third_party))
    outside = [touch for touch in touches if not is_trl_module(touch[0])]
    assert outside == []


def test_the_private_touch_scan_sees_overrides_super_calls_mixins_and_attributes(tmp_path):
    from tests.private_touches import attribute_touches, overrides, own_private_names, third_party_private_names

    third_party = third_party_private_names()
    assert {"_metrics", "_calculate_rewards", "_save_checkpoint", "_signature_columns"} <= third_party
    found = overrides()
    assert ("trl_ext.trainers._trl_hooks", "GRPOHookMixin", "_calculate_rewards") in found  # a mixin's override
    assert ("trl_ext.trainers._trl_checkpoint", "CheckpointHooksMixin", "_save_checkpoint") in found
    assert ("trl_ext.trainers._trl_card", "RecipeTagsMixin", "_tag_names") in found  # an attribute TRL reads
    touched = {(module, name) for module, _, name in attribute_touches(third_party, own_private_names(third_party))}
    assert ("trl_ext.trainers._trl_hooks", "_metrics") in touched  # self._metrics
    assert ("trl_ext.trainers._trl_ppo", "_get_per_token_logps_and_entropies") in touched  # a call
    assert ("trl_ext.trainers._trl_checkpoint", "_save_checkpoint") in touched  # super()._save_checkpoint(...)
    probe = tmp_path / "probe.py"
    probe.write_text('name = getattr(trainer, "_paper", {})\nsetattr(trainer, "_metrics", None)\n')
    probed = attribute_touches(third_party, set(), {"probe": probe})
    assert sorted((line, name) for _, line, name in probed) == [
        (1, "_paper"),
        (2, "_metrics"),
    ]  # getattr/setattr forms
