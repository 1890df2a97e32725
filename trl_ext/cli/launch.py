"""`trl-ext <recipe> --accelerate_config NAME|PATH ...`: launch a recipe under `accelerate launch`, as
`trl <command> --accelerate_config` does.

NAME is one of the configs shipped in ``trl_ext/accelerate_configs`` (ddp, zero2, zero3, zero3_offload, fsdp); any
other value must be a config file. Flags the recipe does not know (``--num_processes``, ``--num_machines``,
``--machine_rank``, ``--main_process_ip``, ``--main_process_port``, ``--mixed_precision``, ...) go to accelerate;
the rest to the recipe, which every process runs as ``python -m trl_ext.cli <recipe> ...``.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

ACCELERATE_CONFIGS = ("ddp", "zero2", "zero3", "zero3_offload", "fsdp")
FLAG = "--accelerate_config"


def accelerate_config_path(value: str) -> str:
    """The config file for ``--accelerate_config``: a shipped config by name, else an existing file."""
    if value in ACCELERATE_CONFIGS:
        return str(files("trl_ext") / "accelerate_configs" / f"{value}.yaml")
    if Path(value).is_file():
        return value
    raise ValueError(
        f"`{FLAG}`={value!r} is neither a config shipped with trl_ext ({', '.join(ACCELERATE_CONFIGS)}) nor an "
        "existing file. Pass one of those names or the path of an accelerate config YAML."
    )


def _pop_flag(argv: list[str]) -> tuple[str, list[str]]:
    index = argv.index(FLAG)
    if index + 1 >= len(argv) or argv[index + 1].startswith("--"):
        raise ValueError(f"`{FLAG}` needs a value: one of {', '.join(ACCELERATE_CONFIGS)}, or a config file path.")
    return argv[index + 1], argv[:index] + argv[index + 2 :]


def _without_subsequence(items: list[str], subsequence: list[str]) -> list[str]:
    """``items`` with the ordered ``subsequence`` taken out (the flags that go to accelerate)."""
    rest, pending = [], iter(subsequence)
    current = next(pending, None)
    for item in items:
        if current is not None and item == current:
            current = next(pending, None)
        else:
            rest.append(item)
    return rest


def _yaml_settings(argv: list[str]) -> dict:
    import yaml

    with open(argv[argv.index("--config") + 1]) as handle:
        settings = yaml.safe_load(handle) or {}
    settings.pop("env", None)  # set by each process's own parser
    return settings


def _without_config(argv: list[str]) -> list[str]:
    if "--config" not in argv:
        return argv
    index = argv.index("--config")
    return argv[:index] + argv[index + 2 :]


def accelerate_launch_args(recipe: str, argv: list[str]) -> list[str]:
    """The arguments of `accelerate launch` that run ``trl-ext <recipe> argv`` on every process."""
    from trl import ModelConfig, TrlParser

    from trl_ext.cli.parser import ScriptArguments
    from trl_ext.recipes import recipe_classes

    value, argv = _pop_flag(list(argv))
    config_file = accelerate_config_path(value)
    config_cls, _ = recipe_classes(recipe)
    parser = TrlParser((ScriptArguments, config_cls, ModelConfig), prog=f"trl-ext {recipe}")
    # Only split the flags here: building the configs would set up devices and process groups in the launcher.
    config_unknown = parser.set_defaults_with_config(**_yaml_settings(argv)) if "--config" in argv else []
    if config_unknown:
        raise ValueError(
            f"Unknown keys in the --config YAML: {config_unknown}. Launch settings (num_processes, ...) go on the "
            f"command line next to {FLAG}, or into the accelerate config file."
        )
    _, launch_flags = parser.parse_known_args(_without_config(argv))
    recipe_args = _without_subsequence(argv, launch_flags)
    return ["--config_file", config_file, *launch_flags, "--module", "trl_ext.cli", recipe, *recipe_args]


def launch(recipe: str, argv: list[str]) -> None:
    """Run ``trl-ext <recipe> argv`` under `accelerate launch` with the config named by ``--accelerate_config``."""
    from accelerate.commands.launch import launch_command, launch_command_parser

    launch_command(launch_command_parser().parse_args(accelerate_launch_args(recipe, argv)))
