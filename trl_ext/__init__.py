"""trl_ext: paper-exact RL recipes for reasoning models on top of Hugging Face TRL.

Names are imported lazily so that ``import trl_ext`` stays light (the trainers pull in TRL and transformers).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "GRPOConfig": "trl_ext.trainers.grpo",
    "GRPOTrainer": "trl_ext.trainers.grpo",
    "DAPOConfig": "trl_ext.trainers.dapo",
    "DAPOTrainer": "trl_ext.trainers.dapo",
    "DrGRPOConfig": "trl_ext.trainers.dr_grpo",
    "DrGRPOTrainer": "trl_ext.trainers.dr_grpo",
    "RLOOConfig": "trl_ext.trainers.rloo",
    "RLOOTrainer": "trl_ext.trainers.rloo",
    "MagistralConfig": "trl_ext.trainers.magistral",
    "MagistralTrainer": "trl_ext.trainers.magistral",
    "ProRLConfig": "trl_ext.trainers.prorl",
    "ProRLTrainer": "trl_ext.trainers.prorl",
    "PPOConfig": "trl_ext.trainers.ppo",
    "PPOTrainer": "trl_ext.trainers.ppo",
    "DPOConfig": "trl_ext.trainers.dpo",
    "DPOTrainer": "trl_ext.trainers.dpo",
    "RewardConfig": "trl_ext.trainers.reward",
    "RewardTrainer": "trl_ext.trainers.reward",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'trl_ext' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
