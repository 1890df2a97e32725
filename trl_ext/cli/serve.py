"""`trl-ext sandbox-serve`: serve code execution (SandboxFusion's /run_code) from this machine."""

from __future__ import annotations

import argparse
import os


def run(args: argparse.Namespace) -> None:
    from trl_ext.sandbox.server import ServeConfig, serve

    request_bytes = int(args.max_request_mb * (1 << 20))
    secret = os.environ.get(args.secret_env) or None  # never on the command line, where `ps` shows it
    limits = {"max_request_bytes": request_bytes, "read_timeout_s": args.read_timeout, "secret": secret}
    limits |= {"header_timeout_s": args.header_timeout, "per_address": args.per_address}
    limits |= {"max_answers_mb": args.max_answers_mb}
    serve(ServeConfig(args.host, args.port, args.workers, args.queue, args.backend, **limits))
