"""Test harness: offline tiny models saved once per pytest run."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model_paths(tmp_path_factory):
    """{"policy": path, "reward_model": path}: a tiny Qwen2 causal LM and a scalar-head RM, saved with the tokenizer."""
    from trl_ext.tiny import save_tiny_models

    return save_tiny_models(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture(scope="session")
def tiny_policy_path(tiny_model_paths):
    return str(tiny_model_paths["policy"])


@pytest.fixture(scope="session")
def tiny_reward_model_path(tiny_model_paths):
    return str(tiny_model_paths["reward_model"])
