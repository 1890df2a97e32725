"""Class 6: a run takes nothing the kernel counts beyond its own processes, host-wide or per uid (shared with the
trainer as non-root): kernel AIO contexts (host-wide ``fs.aio-max-nr``), locked pages (page cache no memory
measure counts), real-time or raised priorities, message queues and queued signals, on every backend."""

import json

from trl_ext.sandbox import Limits, run

from .._backends import EACH_BACKEND, sandbox_backend, sandbox_server  # noqa: F401

PROBE = """
import ctypes, json, resource
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
context = ctypes.c_ulong(0)
ctypes.set_errno(0)
aio = libc.syscall(ctypes.c_long(206), ctypes.c_long(64), ctypes.byref(context))  # io_setup
out = {"io_setup": ctypes.get_errno() if aio == -1 else 0}
for name in ("RLIMIT_MEMLOCK", "RLIMIT_RTPRIO", "RLIMIT_NICE", "RLIMIT_MSGQUEUE", "RLIMIT_SIGPENDING", "RLIMIT_CORE"):
    out[name] = resource.getrlimit(getattr(resource, name))
print(json.dumps(out))
"""


@EACH_BACKEND
def test_no_run_takes_host_or_uid_wide_kernel_resources():
    result = run(PROBE, limits=Limits(timeout_s=10.0))
    assert result.status == "ok", result.stderr
    got = json.loads(result.stdout)
    assert got.pop("io_setup") == 1  # EPERM from the filter
    assert got.pop("RLIMIT_MEMLOCK") == [64 << 10, 64 << 10]
    assert got.pop("RLIMIT_SIGPENDING")[1] <= 1024
    assert got.pop("RLIMIT_CORE") == [1, 1]  # 0 does not stop a core_pattern pipe (apport, systemd-coredump)
    assert got == {"RLIMIT_RTPRIO": [0, 0], "RLIMIT_NICE": [0, 0], "RLIMIT_MSGQUEUE": [0, 0]}


def test_a_service_client_asks_for_at_most_twice_the_default_processes_and_descriptors():
    """Behind a non-root sandbox-serve every run shares one uid's process budget: a client asking for nproc 512
    took 16x a run's share from concurrent requests."""
    import pytest

    from trl_ext.sandbox import native_payload
    from trl_ext.sandbox.run_code import BadRequest, decode_body

    payload = {"mode": "script", "code": "print(1)"}
    for limits, allowed in (
        (Limits(nproc=64, nofile=1024), True),
        (Limits(nproc=65), False),
        (Limits(nofile=1025), False),
    ):
        body = {
            "code": "",
            "language": "python",
            native_payload.FIELD: native_payload.request_field(payload, limits, None, None),
        }
        if allowed:
            assert decode_body(json.dumps(body).encode(), 60.0, 8192).native.limits["nproc"] == limits.nproc
        else:
            with pytest.raises(BadRequest, match="nproc|nofile"):
                decode_body(json.dumps(body).encode(), 60.0, 8192)
