"""trl-ext's extension of SandboxFusion's ``POST /run_code``: the harness's payload instead of a program.

Against any SandboxFusion service the remote backend sends a Python program (``remote._BOOTSTRAP``) that starts
the harness in a second interpreter and relays its output. ``trl-ext sandbox-serve`` also accepts the payload
itself, in the field ``trl_ext_payload``, and runs it on its local backend as a local run goes (its fork servers
included): one interpreter start and one relay fewer per run. A client sends it only to a service whose
``GET /health`` names the same harness digest (``base.harness_digest``), i.e. the same record protocol;
anywhere else it sends the bootstrap.

The service trusts this payload no more than the bootstrap's code: all of it is read inside the sandbox. The
fields a local backend sets itself (``uid``, ``limits``, ``runtime``, ``kill_all``) are set by the service; the
limits a client may ask for are checked and capped here.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math

from trl_ext.sandbox._process import Progress, RunResult
from trl_ext.sandbox.base import STREAMED, Backend, harness_runtime
from trl_ext.sandbox.limits import Limits

FIELD = "trl_ext_payload"
HEALTH_KEY = "trl_ext_payload"  # GET /health: the harness digest this service runs payloads with
LIMIT_KEY = "max_request_bytes"  # GET /health: the largest request body the service reads
WORKERS_KEY = "workers"  # GET /health: the programs the service runs at once
TIMEOUT_KEY = "max_timeout_s"  # GET /health: the longest run_timeout the service accepts
# the limits a client may set, each with the most a service grants (RLIMIT values; scratch is disk or tmpfs)
# nproc and nofile: behind a non-root service every run shares its uid's process budget (RLIMIT_NPROC counts
# per uid), so one client may ask for at most twice the default of either
LIMIT_CAPS = {"file_size_mb": 1024, "scratch_mb": 4096, "nproc": 64, "nofile": 1024}
_MAX_MARKER = 256
_MAX_NONCE = 4096


@dataclasses.dataclass
class NativeRun:
    """A decoded ``trl_ext_payload``: the harness payload, its nonce, per-case deadline and limits."""

    payload: dict | bytes  # bytes: ``packed`` while the request waits
    nonce: bytes | None
    progress: Progress | None
    limits: dict


def request_field(payload: dict, limits: Limits, nonce: bytes | None, progress: Progress | None) -> dict:
    """The ``trl_ext_payload`` field of a request (the service adds its own compiled runtime)."""
    return {
        "payload": {key: value for key, value in payload.items() if key != "runtime"},
        "nonce": None if nonce is None else binascii.b2a_base64(nonce, newline=False).decode(),
        "marker": None if progress is None else progress.marker.decode("ascii"),
        "step_s": None if progress is None else progress.step_s,
        "limits": {name: getattr(limits, name) for name in (*LIMIT_CAPS, "site_packages")},
    }


def parse_field(value: object, timeout_s: float) -> NativeRun:
    """A checked ``trl_ext_payload`` (``timeout_s``: the request's run timeout), or ValueError saying what is
    wrong with it; never any other error."""
    if not isinstance(value, dict) or set(value) - {"payload", "nonce", "marker", "step_s", "limits"}:
        raise ValueError(f"`{FIELD}` must be an object with payload, nonce, marker, step_s and limits")
    payload = value.get("payload")
    if not isinstance(payload, dict) or not isinstance(payload.get("mode"), str):
        raise ValueError(f"`{FIELD}.payload` must be an object with a string `mode`")
    if any(not isinstance(payload.get(key, []), list) for key in STREAMED):
        raise ValueError(f"`{FIELD}.payload`'s {' and '.join(STREAMED)} must be lists")
    return NativeRun(payload, _nonce(value.get("nonce")), _progress(value, timeout_s), _limits(value.get("limits")))


def _nonce(value: object) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_NONCE:
        raise ValueError(f"`{FIELD}.nonce` must be base64 text of at most {_MAX_NONCE} characters, or null")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"`{FIELD}.nonce` is not base64") from None


def _progress(value: dict, timeout_s: float) -> Progress | None:
    marker, step_s = value.get("marker"), value.get("step_s")
    if marker is None:
        return None
    if not isinstance(marker, str) or not marker.isascii() or not 0 < len(marker) <= _MAX_MARKER:
        raise ValueError(f"`{FIELD}.marker` must be ASCII text of 1 to {_MAX_MARKER} characters, or null")
    if isinstance(step_s, bool) or not isinstance(step_s, (int, float)) or not 0 < step_s < math.inf:
        raise ValueError(f"`{FIELD}.step_s` must be a number > 0 with a marker")
    return Progress(marker.encode(), min(float(step_s), timeout_s))


def _limits(value: object) -> dict:
    value = {} if value is None else value
    if not isinstance(value, dict) or set(value) - {*LIMIT_CAPS, "site_packages"}:
        raise ValueError(f"`{FIELD}.limits` may only set {', '.join(LIMIT_CAPS)} and site_packages")
    for name, cap in LIMIT_CAPS.items():
        given = value.get(name, 1)
        if isinstance(given, bool) or not isinstance(given, int) or not 0 < given <= cap:
            raise ValueError(f"`{FIELD}.limits.{name}` must be an integer in 1..{cap}, got {str(given)[:40]}")
    if not isinstance(value.get("site_packages", False), bool):
        raise ValueError(f"`{FIELD}.limits.site_packages` must be true or false")
    return dict(value)


def packed(native: NativeRun) -> NativeRun:
    """``native`` with its payload as compact JSON while the request waits for a worker: a decoded payload (a
    call's arguments) holds many times its bytes in objects; ``run`` decodes it again once a worker takes it."""
    if isinstance(native.payload, bytes):
        return native
    return dataclasses.replace(native, payload=json.dumps(native.payload, separators=(",", ":")).encode())


def run(runner: Backend, native: NativeRun, stdin: bytes, limits: Limits) -> RunResult:
    """Run ``native`` on the service's local ``runner`` under ``limits`` (the request's, with the client's own
    limits applied), exactly as a local run of that payload."""
    decoded = json.loads(native.payload) if isinstance(native.payload, bytes) else native.payload
    payload = {**decoded, "runtime": harness_runtime(), "kill_all": runner.kill_all_safe}
    limits = dataclasses.replace(limits, **native.limits)
    return runner.launch(payload, stdin, limits, native.nonce, native.progress)
