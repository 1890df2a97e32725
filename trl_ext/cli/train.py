"""`trl-ext <recipe>`: parse a recipe's flags and YAML with TrlParser, build its trainer, train, save, push."""

from __future__ import annotations

import importlib
import os
from typing import Any

from trl_ext.cli.parser import ScriptArguments
from trl_ext.data.loading import load_any_dataset
from trl_ext.recipes import get_recipe, recipe_classes


def resolve_reward(name: str) -> Any:
    """A reward function from its trl_ext.rewards name or `module:function`; anything else is a model id/path."""
    rewards = importlib.import_module("trl_ext.rewards")
    if ":" in name:
        module, attribute = name.split(":", 1)
        return getattr(importlib.import_module(module), attribute)
    if hasattr(rewards, name):
        return getattr(rewards, name)
    if os.path.isdir(name) or "/" in name:
        return name  # TRL loads reward models from a path or Hub id
    raise ValueError(
        f"Unknown reward function {name!r}: use one of {', '.join(rewards.__all__)}, `module:function`, or a "
        "reward-model path."
    )


def train(recipe: str, argv: list[str]) -> Any:
    """Parse `--config`/flags with TrlParser, build the recipe's trainer, train, save (and push if asked)."""
    from trl import ModelConfig, TrlParser, get_peft_config, get_quantization_config

    from trl_ext.models import adapter_config_file, check_model_flags, model_init_kwargs_from

    config_cls, trainer_cls = recipe_classes(recipe)
    parser = TrlParser((ScriptArguments, config_cls, ModelConfig), prog=f"trl-ext {recipe}")
    script_args, training_args, model_args = parser.parse_args_and_config(argv)
    if model_args.model_name_or_path is None:
        raise SystemExit("trl-ext: --model_name_or_path is required (a local path or a Hub id).")
    # ModelConfig flags reach the model as `trl grpo` passes them: from_pretrained kwargs and a quantization config.
    training_args.model_init_kwargs = model_init_kwargs_from(model_args, training_args.model_init_kwargs)
    quantization_config = get_quantization_config(model_args)
    adapter = adapter_config_file(model_args.model_name_or_path, model_args.model_revision) is not None
    check_model_flags(model_args, quantized=quantization_config is not None, adapter=adapter)
    kwargs: dict[str, Any] = {
        "model": model_args.model_name_or_path,
        "args": training_args,
        "train_dataset": load_any_dataset(
            script_args.dataset_name, script_args.dataset_config, script_args.dataset_train_split
        ),
        "peft_config": get_peft_config(model_args),
    }
    if quantization_config is not None:
        kwargs["quantization_config"] = quantization_config
    if script_args.dataset_test_split:
        kwargs["eval_dataset"] = load_any_dataset(
            script_args.dataset_name, script_args.dataset_config, script_args.dataset_test_split
        )
    if get_recipe(recipe).takes_rewards:
        kwargs["reward_funcs"] = [resolve_reward(name) for name in script_args.reward_funcs]
    trainer = trainer_cls(**kwargs)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.create_model_card(dataset_name=script_args.dataset_name)  # trl_ext's card: save_model writes none
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
    return trainer
