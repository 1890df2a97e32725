"""trl_ext: paper-exact RL recipes for reasoning models on top of Hugging Face TRL.

Names are imported lazily so that ``import trl_ext`` stays light (the trainers pull in TRL and transformers).
"""

from __future__ import annotations

import importlib
from typing import Any

from trl_ext.recipes import public_names

__version__ = "0.1.0"

# public name -> module that defines it, from the recipe registry
_LAZY: dict[str, str] = public_names()

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'trl_ext' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
