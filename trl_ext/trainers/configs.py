"""How a trl_ext trainer takes its ``args``: one rule for every trainer whose Config extends a TRL config.

- ``None``: the trainer's Config with TRL's default output folder (``<model name>-<recipe>``).
- the trainer's Config (or a subclass of it): as given.
- a plain TRL config of the class the trainer's Config extends (``trl.GRPOConfig``, ``trl.DPOConfig``), where the
  Config only adds extensions that are off by default: a copy as the trl_ext Config with every extension at its
  default, so the trainer reads ``self.args.<extension>`` alone (TRL's ``__post_init__`` already ran on it; trl_ext's
  own checks concern its extensions only).
- a plain TRL config for a Config that changes TRL's defaults (a paper recipe): a TypeError naming the class to build.
"""

from __future__ import annotations

import copy
from dataclasses import MISSING, Field, fields
from typing import Any


def resolve_config(trainer_cls: type, model: Any, args: Any) -> Any:
    """The config ``trainer_cls`` (which names its Config in ``config_class``) trains with, given ``args``."""
    config_class = trainer_cls.config_class
    if args is None:
        from trl.trainer.utils import get_config_model_id

        name = model if isinstance(model, str) else get_config_model_id(model.config)
        recipe = trainer_cls.__name__.removesuffix("Trainer")
        return config_class(output_dir=f"{name.split('/')[-1]}-{recipe}")
    if isinstance(args, config_class):
        return args
    plain = trl_config_class(config_class)
    if plain is None or not isinstance(args, plain) or not _keeps_trl_defaults(config_class, plain):
        raise TypeError(
            f"{trainer_cls.__name__} needs a {config_class.__name__} (it carries the paper defaults), got "
            f"{type(args).__module__}.{type(args).__name__}. Build the config with trl_ext.{config_class.__name__}"
            "(...) and the same arguments."
        )
    upgraded = copy.copy(args)
    upgraded.__class__ = config_class
    plain_names = {field.name for field in fields(plain)}
    for field in fields(config_class):
        if field.name not in plain_names:
            setattr(upgraded, field.name, _default(field))
    return upgraded


def trl_config_class(config_class: type) -> type | None:
    """The TRL config class a trl_ext Config extends (the first of its bases defined in ``trl``), or None."""
    return next((base for base in config_class.__mro__[1:] if base.__module__.split(".")[0] == "trl"), None)


def _keeps_trl_defaults(config_class: type, plain: type) -> bool:
    """Whether every TRL field keeps TRL's default in ``config_class`` (it only adds off-by-default extensions)."""
    trl_fields = {field.name: field for field in fields(plain)}
    return all(
        _default(field) == _default(trl_fields[field.name])
        for field in fields(config_class)
        if field.name in trl_fields
    )


def _default(field: Field) -> Any:
    if field.default_factory is not MISSING:
        return field.default_factory()
    return field.default
