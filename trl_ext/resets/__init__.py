"""Reference resets, in one package (ProRL, arXiv 2505.24864 §2.3.1): the Config fields (``arguments``), the
triggers and their bookkeeping (``triggers``), copying the policy into the reference and re-initialising the optimizer
state (``weights``), and the trainer mixin (``mixin``). TRL's checkpoint hooks reach the mixin through
``trainers._trl_checkpoint``."""

from trl_ext.resets.arguments import ReferenceResetArguments
from trl_ext.resets.mixin import ReferenceResetMixin
from trl_ext.resets.triggers import RESET_STATE_FILE, ReferenceResetCallback, ResetBookkeeping
from trl_ext.resets.weights import (
    MAX_SHARD_BYTES,
    POLICY_ADAPTER,
    REFERENCE_ADAPTER,
    REFERENCE_DIR,
    REFERENCE_INDEX,
    adapter_pairs,
    copy_pieces,
    copy_policy_to_reference,
    ensure_reference_adapter,
    gathered_parameters,
    is_partitioned,
    is_sharded,
    load_reference,
    local_piece,
    optimizer_chain,
    reference_pairs,
    reset_optimizer_state,
    save_reference,
)

__all__ = [
    "MAX_SHARD_BYTES",
    "POLICY_ADAPTER",
    "REFERENCE_ADAPTER",
    "REFERENCE_DIR",
    "REFERENCE_INDEX",
    "RESET_STATE_FILE",
    "ReferenceResetArguments",
    "ReferenceResetCallback",
    "ReferenceResetMixin",
    "ResetBookkeeping",
    "adapter_pairs",
    "copy_pieces",
    "copy_policy_to_reference",
    "ensure_reference_adapter",
    "gathered_parameters",
    "is_partitioned",
    "is_sharded",
    "load_reference",
    "local_piece",
    "optimizer_chain",
    "reference_pairs",
    "reset_optimizer_state",
    "save_reference",
]
