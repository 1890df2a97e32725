"""Reference-policy resets (ProRL, arXiv 2505.24864 §2.3.1): copy the policy into the reference, re-initialise
the optimizer state in place, and carry the reference across checkpoints.

Nothing in TRL does this (DESIGN §4): TRL's ``sync_ref_model`` never touches the optimizer, is refused with
PEFT, and is lost on resume because TRL does not checkpoint the reference model.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
from accelerate.state import AcceleratorState
from safetensors.torch import load_file, save_file

REFERENCE_FILE = "trl_ext_reference.safetensors"
POLICY_ADAPTER = "default"
REFERENCE_ADAPTER = "ref"


def optimizer_chain(optimizer: object) -> list[torch.optim.Optimizer]:
    """The torch optimizers inside a wrapper chain (AcceleratedOptimizer → DeepSpeed ZeRO optimizer → torch)."""
    found, seen, current = [], set(), optimizer
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, torch.optim.Optimizer):
            found.append(current)
        current = getattr(current, "optimizer", None)
    return found


def reset_optimizer_state(optimizer: object) -> int:
    """Zero every optimizer state tensor and step counter IN PLACE; return how many tensors were zeroed.

    Equivalent to a freshly created optimizer (Adam's moments are zero and its bias correction restarts at step
    1) while keeping the state dict, its tensors and their partitioning alive: DeepSpeed ZeRO keeps flat fp32
    partitions there and its checkpointing reads them, so the state must never be replaced or cleared. The
    learning-rate schedule is not touched.
    """
    optimizers = optimizer_chain(optimizer)
    if not optimizers:
        raise ValueError(f"`optimizer` ({type(optimizer).__name__}) wraps no torch.optim.Optimizer to reset.")
    zeroed, seen_states = 0, set()
    for torch_optimizer in optimizers:
        if id(torch_optimizer.state) in seen_states:  # wrappers expose their inner optimizer's state
            continue
        seen_states.add(id(torch_optimizer.state))
        for state in torch_optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    value.zero_()
                    zeroed += 1
                elif key == "step":
                    state[key] = 0
        for group in torch_optimizer.param_groups:  # e.g. DeepSpeed FusedAdam counts steps per group
            if "step" in group:
                group["step"] = 0
    return zeroed


def _zero3_enabled() -> bool:
    if not AcceleratorState._shared_state:  # accelerate never initialised in this process: no DeepSpeed
        return False
    try:
        plugin = AcceleratorState().deepspeed_plugin
    except ValueError:  # a PartialState without a full AcceleratorState: no DeepSpeed either
        return False
    return plugin is not None and plugin.zero_stage == 3


def adapter_pairs(model: torch.nn.Module) -> Iterator[tuple[torch.nn.Parameter, torch.nn.Parameter]]:
    """(policy "default" adapter parameter, reference "ref" adapter parameter) pairs of a PEFT model."""
    for name, param in model.named_parameters():
        if f".{POLICY_ADAPTER}." in name:
            yield param, model.get_parameter(name.replace(f".{POLICY_ADAPTER}.", f".{REFERENCE_ADAPTER}."))


def ensure_reference_adapter(model: torch.nn.Module) -> None:
    """Create the frozen "ref" adapter TRL uses as reference when it is missing (a PEFT config was passed).

    TRL only creates it when a PeftModel is passed; with a peft_config its reference is the base model with the
    adapter disabled. TRL chooses the "ref" adapter whenever one exists, so adding it here switches it over.
    """
    if REFERENCE_ADAPTER not in model.peft_config:
        model.add_adapter(REFERENCE_ADAPTER, model.peft_config[POLICY_ADAPTER])
        model.set_adapter(POLICY_ADAPTER)  # add_adapter must not change which adapter trains
        for name, param in model.named_parameters():
            if f".{REFERENCE_ADAPTER}." in name:
                param.requires_grad_(False)


@torch.no_grad()
def copy_policy_to_reference(model: torch.nn.Module, ref_model: torch.nn.Module | None) -> None:
    """Make the reference an exact copy of the policy.

    Full fine-tuning: every reference parameter is overwritten with the policy's (ZeRO-3 partitions gathered
    first; rank 0's copy is broadcast). TRL's ``SyncRefModelCallback.sync_target_model`` with α = 1 does the same
    by ``mul_(0).add_()``, but needs an initialised accelerate state and is not exact for non-finite values.
    PEFT (``ref_model`` None, a PeftModel policy): copy the "default" adapter into the frozen "ref" adapter,
    creating it if needed.
    """
    if ref_model is not None:
        with gathered_parameters(list(model.parameters()) + list(ref_model.parameters())):
            for ref_param, policy_param in zip(ref_model.parameters(), model.parameters(), strict=True):
                ref_param.copy_(policy_param)
        return
    if not hasattr(model, "peft_config"):
        raise ValueError("There is no reference model to reset: `beta` is 0 and the policy is not a PEFT model.")
    ensure_reference_adapter(model)
    with gathered_parameters(list(model.parameters())):
        for policy_param, ref_param in adapter_pairs(model):
            ref_param.copy_(policy_param)


def reference_state(model: torch.nn.Module, ref_model: torch.nn.Module | None) -> dict[str, torch.Tensor]:
    """The reference weights to checkpoint: the whole reference model, or the "ref" adapter of a PEFT policy."""
    if ref_model is not None:
        with gathered_parameters(list(ref_model.parameters()), modifier_rank=None):
            return {name: p.detach().cpu().clone() for name, p in ref_model.named_parameters()}
    return {name: p.detach().cpu().clone() for name, p in model.named_parameters() if f".{REFERENCE_ADAPTER}." in name}


@torch.no_grad()
def load_reference_state(
    model: torch.nn.Module, ref_model: torch.nn.Module | None, state: dict[str, torch.Tensor]
) -> None:
    """Write checkpointed reference weights back (inverse of ``reference_state``)."""
    if ref_model is None:
        ensure_reference_adapter(model)
    target = ref_model if ref_model is not None else model
    params = dict(target.named_parameters())
    missing = sorted(set(state) - set(params))
    if missing:
        raise ValueError(f"The checkpointed reference does not match the model: unknown parameters {missing[:5]}.")
    with gathered_parameters(list(params.values()), modifier_rank=0):
        for name, value in state.items():
            params[name].copy_(value.to(params[name].device, params[name].dtype))


def save_reference(
    directory: str | os.PathLike, model: torch.nn.Module, ref_model: torch.nn.Module | None, write: bool = True
) -> str:
    """Save the reference into ``directory``. Every process must call it (ZeRO-3 gathers); only ``write`` ones write."""
    path = os.path.join(directory, REFERENCE_FILE)
    state = reference_state(model, ref_model)
    if write:
        os.makedirs(directory, exist_ok=True)
        save_file({name: t.contiguous() for name, t in state.items()}, path)
    return path


def load_reference(directory: str | os.PathLike, model: torch.nn.Module, ref_model: torch.nn.Module | None) -> bool:
    """Restore the reference saved in ``directory``; False when the checkpoint holds none (no reset happened)."""
    path = os.path.join(directory, REFERENCE_FILE)
    if not os.path.exists(path):
        return False
    load_reference_state(model, ref_model, load_file(path))
    return True


@contextlib.contextmanager
def gathered_parameters(params: list[torch.nn.Parameter], modifier_rank: int | None = 0):
    """Gather ZeRO-3 partitions for the duration of the block (a no-op otherwise)."""
    if not _zero3_enabled():
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(params, modifier_rank=modifier_rank):
        yield
