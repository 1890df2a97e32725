"""Moved to ``trl_ext.workers.pool`` (the sandbox's evaluation workers use it too); kept for old imports."""

from trl_ext.workers.pool import WorkerPool

__all__ = ["WorkerPool"]
