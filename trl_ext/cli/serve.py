"""`trl-ext sandbox-serve`: serve code execution (SandboxFusion's /run_code) from this machine."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> None:
    from trl_ext.sandbox.server import ServeConfig, serve

    request_bytes = int(args.max_request_mb * (1 << 20))
    serve(ServeConfig(args.host, args.port, args.workers, args.queue, args.backend, max_request_bytes=request_bytes))
