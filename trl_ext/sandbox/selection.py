"""Backend selection: ``get_backend`` ("auto": bubblewrap where its self-test passes, else landlock), names and the
remote backend's URL, from arguments or ``TRL_EXT_SANDBOX_BACKEND`` / ``TRL_EXT_SANDBOX_URL``."""

from __future__ import annotations

import logging
import os
import threading
import urllib.parse

from trl_ext.sandbox.base import UNAVAILABLE, Backend, SandboxUnavailable
from trl_ext.sandbox.bwrap import BwrapBackend
from trl_ext.sandbox.landlock import LandlockBackend
from trl_ext.sandbox.limits import Limits
from trl_ext.sandbox.remote import RemoteBackend
from trl_ext.sandbox.rlimit import RlimitBackend

BACKEND_NAMES = ("auto", "bwrap", "landlock", "remote", "rlimit")
BACKEND_ENV = "TRL_EXT_SANDBOX_BACKEND"
URL_ENV = "TRL_EXT_SANDBOX_URL"

_BACKENDS: dict[str, Backend] = {}
_CHECKED: set[str] = set()
_LOCK = threading.Lock()
_LOGGER = logging.getLogger("trl_ext.sandbox")


def backend_name(name: str | Backend | None = None) -> str:
    """``name`` (or a backend's name), or the ``TRL_EXT_SANDBOX_BACKEND`` default ("auto"), validated."""
    if isinstance(name, Backend):
        return name.name
    where = "backend"
    if name is None:
        name, where = os.environ.get(BACKEND_ENV) or "auto", BACKEND_ENV
    if name not in BACKEND_NAMES:
        raise ValueError(
            f"`{where}` must be one of {', '.join(BACKEND_NAMES)} (rlimit isolates nothing: explicit opt-in only), "
            f"got {name!r}."
        )
    return name


def sandbox_url(url: str | None = None) -> str:
    """``url``, or ``TRL_EXT_SANDBOX_URL``: the execution service of the remote backend, validated."""
    where = "sandbox_url"
    if url is None:
        url, where = os.environ.get(URL_ENV), URL_ENV
    if not url:
        raise ValueError(f"The remote sandbox backend needs `sandbox_url=` or {URL_ENV} (e.g. http://host:8080).")
    parts = urllib.parse.urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or parts.query or parts.fragment:
        raise ValueError(f"`{where}` must be an http(s) URL such as http://host:8080, got {url!r}.")
    return url.rstrip("/")


def get_backend(name: str | Backend | None = None, url: str | None = None) -> Backend:
    """The backend called ``name`` (default: ``TRL_EXT_SANDBOX_BACKEND``, else "auto"), checked once per process
    with a trivial run. "auto" is bubblewrap where it passes that check, else landlock, else
    ``SandboxUnavailable``; it never falls back to rlimit. "remote" sends runs to ``url`` (default
    ``TRL_EXT_SANDBOX_URL``). A ``Backend`` instance is returned as is."""
    if isinstance(name, Backend):
        return name
    name = backend_name(name)
    if name == "remote":
        url = sandbox_url(url)
        with _LOCK:
            if f"remote:{url}" not in _BACKENDS:
                _BACKENDS[f"remote:{url}"] = RemoteBackend(url)
                _LOGGER.info("trl_ext sandbox: remote backend, execution service %s", url)
                reason = RemoteBackend.unreachable(url)
                if reason:  # not fatal: the service may come up later, meanwhile runs are infra_error (None)
                    _LOGGER.warning("trl_ext sandbox: the execution service %s is not reachable now (%s)", url, reason)
            return _BACKENDS[f"remote:{url}"]
    with _LOCK:
        if name == "auto":
            return _auto()
        return _checked(name)


def _checked(name: str) -> Backend:
    if name not in _BACKENDS:
        _BACKENDS[name] = {"bwrap": BwrapBackend, "landlock": LandlockBackend, "rlimit": RlimitBackend}[name]()
    backend = _BACKENDS[name]
    if name not in _CHECKED:
        _self_test(backend)
        _CHECKED.add(name)
    return backend


def _auto() -> Backend:
    if "auto" in _BACKENDS:
        return _BACKENDS["auto"]
    failures = []
    for candidate in ("bwrap", "landlock"):
        try:
            backend = _checked(candidate)
        except SandboxUnavailable as exc:
            failures.append(f"{candidate}: {exc}")
            continue
        _LOGGER.info("trl_ext sandbox: using the %s backend (auto)", candidate)
        _BACKENDS["auto"] = backend
        return backend
    raise SandboxUnavailable(
        "No isolated code sandbox can run here. "
        + " ".join(failures)
        + f" Fix one of them, or run `trl-ext sandbox-serve` on a machine where one works and set {BACKEND_ENV}=remote "
        f"and {URL_ENV}=http://that-machine:port."
    )


def _self_test(backend: Backend) -> None:
    result = backend.launch({"mode": "script", "code": "print('ok')"}, b"", Limits(timeout_s=30))
    if result.status != "ok" or result.stdout.strip() != "ok":
        detail = f"self-test status {result.status!r}, stderr: {result.stderr.strip()[-500:]!r}"
        if backend.name == "bwrap":
            raise SandboxUnavailable(UNAVAILABLE.format(detail=detail))
        raise SandboxUnavailable(f"The {backend.name} sandbox backend failed its self-test ({detail}).")
