"""vLLM tests: tiny models vLLM can load, and engines shared by every trainer of the session (see _engine.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def vllm_model_paths(tmp_path_factory):
    """The tiny policy and reward model with head size 32, the smallest vLLM's CPU attention takes."""
    from trl_ext.tiny import VLLM_LOADABLE, save_tiny_models

    return save_tiny_models(tmp_path_factory.mktemp("tiny-vllm-models"), **VLLM_LOADABLE)


@pytest.fixture(scope="session")
def engines():
    from tests.vllm._engine import shared_engines

    with shared_engines() as factory:
        yield factory
