"""Isolated local execution of untrusted (model-written) Python code.

``run(code, stdin)`` runs one program; ``run_tests(program, tests)`` grades it against a stdio, call or assert
test spec with every comparison done outside the sandbox.

Backends (``backend=``, default ``TRL_EXT_SANDBOX_BACKEND``, else "auto"): "auto" picks bubblewrap where its
self-test passes, else landlock, else raises ``SandboxUnavailable`` (the chosen one is logged once); "bwrap";
"landlock" (Landlock + seccomp, for unprivileged containers without user namespaces: ``trl_ext.sandbox.landlock``);
"remote" (an execution service speaking SandboxFusion's /run_code, e.g. ``trl-ext sandbox-serve``; the URL comes
from ``sandbox_url=`` or ``TRL_EXT_SANDBOX_URL``); "rlimit" (isolates nothing, explicit opt-in only).

Security model (bubblewrap backend):
- The launcher gets an allow-listed environment (``limits.SAFE_ENV``): nothing of the trainer's environment,
  tokens included, exists in the sandbox, not even in /proc/1/environ.
- New pid, network (loopback only), IPC, UTS and mount namespaces. The filesystem is an empty read-only root
  with /usr (and /bin, /lib... links), the loader cache and the Python installation bound read-only, plus a
  capped tmpfs at /tmp as the working directory: no $HOME, Hub cache, dataset or checkpoint is visible.
- As root, the harness drops to an unprivileged uid (distinct per concurrent run) before the program starts,
  so RLIMIT_NPROC applies; rlimits cap CPU, address space, file size, processes and descriptors; Python runs
  with ``-I -S`` (no environment, no user or site packages unless ``Limits.site_packages``).
- The parent enforces the wall deadline (from the moment the sandbox is up), output caps, and SIGKILLs the
  launcher's process group; the pid namespace dies with it, so no descendant outlives a run.

Judging (every backend): the sandbox only executes; it never judges. What comes back is stdout alone: raw
output per stdio case, and for call and assert tests each call's result as plain data (``None``, ``bool``,
``int``, ``float``, ``complex``, ``str``, ``bytes`` and lists, tuples, dicts, sets, frozensets of them, checked
by exact type: a subclass or any other object fails the test), decoded by exact type in the judge. Expected
values never enter the sandbox (not in the payload, a frame, a file or a descriptor), so a program that forges
records on stdout, exits early or patches its own builtins can only claim values it could have returned.
Every comparison, arithmetic on results and ``bool()`` of a result happens outside: stdio and call specs in
this process (``compare_stdio``, ``values_equal``, plain builtin operations on plain data), assert specs (and
HumanEval's ``check(candidate)``) by record and replay (``trl_ext.sandbox.replay``): the test code runs in a
trusted evaluation worker process, killed at a deadline, against stand-ins of the program's functions; the
sandbox runs only the calls they asked for. Tests whose calls take arguments that are not plain data, or that
need more than a few rounds of calls depending on earlier results, fail with status "unsupported_test"; none
is ever evaluated in the program's interpreter.
"""

from __future__ import annotations

import dataclasses

from trl_ext.sandbox._process import RunResult, Status
from trl_ext.sandbox.backends import (
    Backend,
    BwrapBackend,
    LandlockBackend,
    RlimitBackend,
    SandboxUnavailable,
    get_backend,
)
from trl_ext.sandbox.comparison import compare_stdio, values_equal
from trl_ext.sandbox.judge import TestReport, run_tests
from trl_ext.sandbox.limits import Limits
from trl_ext.sandbox.test_specs import parse_tests

__all__ = [
    "Backend",
    "BwrapBackend",
    "LandlockBackend",
    "Limits",
    "RlimitBackend",
    "RunResult",
    "SandboxUnavailable",
    "Status",
    "TestReport",
    "compare_stdio",
    "get_backend",
    "parse_tests",
    "run",
    "run_tests",
    "values_equal",
]


def run(
    code: str,
    stdin: str = "",
    *,
    timeout_s: float | None = None,
    memory_mb: int | None = None,
    limits: Limits | None = None,
    backend: str | Backend | None = None,
    sandbox_url: str | None = None,
) -> RunResult:
    """Run ``code`` as a Python script (``python -sP``: -I less -E, see ``limits.ISOLATED``) in the sandbox, feeding it ``stdin``.

    ``backend`` (default: ``TRL_EXT_SANDBOX_BACKEND``, else "auto") is "auto" (bubblewrap where it works, else
    landlock), "bwrap", "landlock", "remote" (the execution service at ``sandbox_url`` or ``TRL_EXT_SANDBOX_URL``)
    or "rlimit" (isolates nothing: explicit opt-in only); see ``get_backend``.

    ``timeout_s`` and ``memory_mb``, when given, override those fields of ``limits`` (default ``Limits()``:
    5 s, 1024 MiB).
    Returns a ``RunResult`` whose ``status`` is "ok", "runtime_error", "timeout", "memory", "output_limit" or
    "infra_error". Raises ``SandboxUnavailable`` if the backend cannot run here.
    """
    overrides = {k: v for k, v in (("timeout_s", timeout_s), ("memory_mb", memory_mb)) if v is not None}
    limits = dataclasses.replace(limits or Limits(), **overrides)
    return get_backend(backend, sandbox_url).launch({"mode": "script", "code": code}, stdin.encode(), limits)
