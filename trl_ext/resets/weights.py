"""Reference-policy resets (ProRL, arXiv 2505.24864 §2.3.1): copy the policy into the reference, re-initialise
the optimizer state in place, and carry the reference across checkpoints.

Nothing in TRL does this: TRL's ``sync_ref_model`` never touches the optimizer, is refused with PEFT, and is lost
on resume because TRL does not checkpoint the reference model.

Scale: nothing here holds a whole model at once. The policy and the reference are sharded alike (ZeRO-3 partitions
each parameter over the same processes; FSDP2 shards each as a DTensor with the same placements), so a reset copies
each process's own pieces with no gather, and a checkpoint stores them per process (replicated parameters: once, in
shards of bounded size); loading reads one tensor at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from accelerate.state import AcceleratorState, is_initialized
from safetensors import safe_open
from safetensors.torch import save_file

REFERENCE_DIR = "trl_ext_reference"
REFERENCE_INDEX = "index.json"
MAX_SHARD_BYTES = 1 << 30  # a process holds at most this much of the reference in CPU memory while saving
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
    if not is_initialized():  # accelerate never initialised in this process: no DeepSpeed
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


def is_partitioned(param: torch.nn.Parameter) -> bool:
    """A ZeRO-3 parameter: each process holds a flat partition of it in ``ds_tensor``."""
    return getattr(param, "ds_tensor", None) is not None


def _is_dtensor(tensor: torch.Tensor) -> bool:
    return type(tensor).__name__ == "DTensor" and hasattr(tensor, "to_local")


def local_piece(param: torch.nn.Parameter) -> torch.Tensor:
    """This process's piece of a parameter: its ZeRO-3 partition, its FSDP2 (DTensor) shard, or the tensor itself."""
    if is_partitioned(param):
        return param.ds_tensor
    if _is_dtensor(param):
        return param.to_local()
    return param.data


def _is_gathered(param: torch.nn.Parameter) -> bool:
    """A ZeRO-3 parameter whose full data is present as well (persistent small parameters, or inside a gather)."""
    if not is_partitioned(param):
        return False
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    return param.ds_status == ZeroParamStatus.AVAILABLE


def is_sharded(param: torch.nn.Parameter) -> bool:
    """Each process holds a different piece of this parameter (ZeRO-3 partition, FSDP2 shard, FSDP1 flat shard)."""
    return is_partitioned(param) or _is_dtensor(param) or type(param).__name__ == "FlatParameter"


@torch.no_grad()
def copy_pieces(pairs: Iterator[tuple[str, torch.nn.Parameter, torch.nn.Parameter]]) -> None:
    """Copy each (name, source, target) parameter piece by piece, without gathering any partition.

    Under ZeRO-3 a target whose full data is also present (a persistent parameter) gets the source's full data too:
    DeepSpeed keeps the policy's persistent parameters gathered and refreshed after every optimizer step.
    """
    for name, source, target in pairs:
        source_piece, target_piece = local_piece(source), local_piece(target)
        if source_piece.shape != target_piece.shape:
            raise RuntimeError(
                f"The policy and the reference are not sharded alike at `{name}` ({tuple(source_piece.shape)} vs "
                f"{tuple(target_piece.shape)} on this process): a piece-by-piece reset needs both prepared the same way."
            )
        target_piece.copy_(source_piece)
        if _is_gathered(target):
            if not _is_gathered(source):
                raise RuntimeError(f"`{name}`: the reference holds full data where the policy does not (ZeRO-3).")
            target.data.copy_(source.data)


def reference_pairs(
    model: torch.nn.Module, ref_model: torch.nn.Module | None
) -> Iterator[tuple[str, torch.nn.Parameter, torch.nn.Parameter]]:
    """(reference parameter name, policy parameter, reference parameter) of a full or a PEFT ("ref" adapter) reference."""
    if ref_model is not None:
        policy = dict(model.named_parameters())
        for name, ref_param in ref_model.named_parameters():
            if name not in policy:
                raise ValueError(f"The reference has a parameter `{name}` that the policy lacks: not the same model.")
            yield name, policy[name], ref_param
        return
    for name, param in model.named_parameters():
        if f".{POLICY_ADAPTER}." in name:
            ref_name = name.replace(f".{POLICY_ADAPTER}.", f".{REFERENCE_ADAPTER}.")
            yield ref_name, param, model.get_parameter(ref_name)


@torch.no_grad()
def copy_policy_to_reference(model: torch.nn.Module, ref_model: torch.nn.Module | None) -> None:
    """Make the reference an exact copy of the policy, each process copying its own pieces (no gather).

    Full fine-tuning: every reference parameter is overwritten with the policy's. TRL's
    ``SyncRefModelCallback.sync_target_model`` with α = 1 does the same by ``mul_(0).add_()`` after gathering whole
    models, needs an initialised accelerate state and is not exact for non-finite values. PEFT (``ref_model`` None,
    a PeftModel policy): copy the "default" adapter into the frozen "ref" adapter, creating it if needed.
    """
    if ref_model is None:
        if not hasattr(model, "peft_config"):
            raise ValueError("There is no reference model to reset: `beta` is 0 and the policy is not a PEFT model.")
        ensure_reference_adapter(model)
    copy_pieces((name, policy, ref) for name, policy, ref in reference_pairs(model, ref_model))


def _reference_params(model: torch.nn.Module, ref_model: torch.nn.Module | None) -> dict[str, torch.nn.Parameter]:
    return {name: ref for name, _, ref in reference_pairs(model, ref_model)}


def _save_in_shards(tensors: Iterator[tuple[str, torch.Tensor]], directory: Path, prefix: str) -> list[str]:
    """Write (name, tensor) pairs into safetensors files of at most MAX_SHARD_BYTES each; return the file names."""
    names, shard, size = [], {}, 0

    def flush():
        nonlocal shard, size
        if shard:
            names.append(f"{prefix}-{len(names):05d}.safetensors")
            save_file(shard, str(directory / names[-1]))
        shard, size = {}, 0

    for name, tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        if shard and size + nbytes > MAX_SHARD_BYTES:
            flush()
        shard[name] = tensor.detach().to("cpu", copy=True).contiguous()
        size += nbytes
    flush()
    return names


def _rank_prefix(rank: int, world_size: int) -> str:
    return f"rank-{rank:05d}-of-{world_size:05d}"


def _rank_and_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def save_reference(
    directory: str | os.PathLike, model: torch.nn.Module, ref_model: torch.nn.Module | None, write: bool = True
) -> Path:
    """Save the reference into ``<directory>/trl_ext_reference``; every process must call it.

    ZeRO-3 partitions and FSDP2 shards are written by each process into its own files (no gather); replicated
    parameters by the ``write`` process only, with the index. Returns the folder.
    """
    folder = Path(directory) / REFERENCE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    rank, world_size = _rank_and_world()
    params = _reference_params(model, ref_model)
    sharded = [name for name, p in params.items() if is_sharded(p)]
    _save_in_shards(((name, local_piece(params[name])) for name in sharded), folder, _rank_prefix(rank, world_size))
    if write:
        replicated = ((name, p.data) for name, p in params.items() if not is_sharded(p))
        index = {"world_size": world_size, "sharded": bool(sharded)}
        index["replicated_files"] = _save_in_shards(replicated, folder, "replicated")
        (folder / REFERENCE_INDEX).write_text(json.dumps(index, indent=2))
    return folder


def _read_files(folder: Path, prefix: str) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of every file of a shard prefix, one tensor in memory at a time."""
    for path in sorted(folder.glob(f"{prefix}-*.safetensors")):
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open has no __iter__)
                yield name, handle.get_tensor(name)


@torch.no_grad()
def load_reference(directory: str | os.PathLike, model: torch.nn.Module, ref_model: torch.nn.Module | None) -> bool:
    """Restore the reference saved in ``directory``; False when the checkpoint holds none (no reset happened)."""
    folder = Path(directory) / REFERENCE_DIR
    if not (folder / REFERENCE_INDEX).exists():
        return False
    index = json.loads((folder / REFERENCE_INDEX).read_text())
    rank, world_size = _rank_and_world()
    if ref_model is None:
        ensure_reference_adapter(model)
    params = _reference_params(model, ref_model)
    sources = [_read_files(folder, "replicated")]
    if index["sharded"]:
        if index["world_size"] != world_size:
            raise ValueError(
                f"`{folder}` holds a reference sharded over {index['world_size']} processes (ZeRO-3/FSDP); this run "
                f"has {world_size}. Resume with {index['world_size']} processes (or from a checkpoint before a reset)."
            )
        sources.append(_read_files(folder, _rank_prefix(rank, world_size)))
    loaded = set()
    for source in sources:
        for name, value in source:
            if name not in params:
                raise ValueError(f"The checkpointed reference does not match the model: unknown parameter `{name}`.")
            param = params[name]
            if _is_gathered(param):
                raise RuntimeError(f"`{name}` is gathered while the reference is loaded; load before the first step.")
            local_piece(param).copy_(value.to(local_piece(param).dtype))
            loaded.add(name)
    missing = sorted(set(params) - loaded)
    if missing:
        raise ValueError(f"The checkpointed reference in `{folder}` lacks parameters {missing[:5]}.")
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
