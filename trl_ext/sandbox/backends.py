"""Compatibility re-exports: the backends now live in ``base``, ``bwrap``, ``landlock``, ``rlimit``, ``remote`` and
``selection`` (old imports of ``trl_ext.sandbox.backends`` keep working)."""

from trl_ext.sandbox.base import Backend, SandboxUnavailable, sandbox_interpreter
from trl_ext.sandbox.bwrap import BwrapBackend
from trl_ext.sandbox.landlock import LandlockBackend
from trl_ext.sandbox.remote import RemoteBackend
from trl_ext.sandbox.rlimit import RlimitBackend
from trl_ext.sandbox.selection import (
    BACKEND_ENV,
    BACKEND_NAMES,
    URL_ENV,
    _self_test,
    backend_name,
    get_backend,
    sandbox_url,
)

__all__ = [
    "BACKEND_ENV",
    "BACKEND_NAMES",
    "URL_ENV",
    "Backend",
    "BwrapBackend",
    "LandlockBackend",
    "RemoteBackend",
    "RlimitBackend",
    "SandboxUnavailable",
    "_self_test",
    "backend_name",
    "get_backend",
    "sandbox_interpreter",
    "sandbox_url",
]
