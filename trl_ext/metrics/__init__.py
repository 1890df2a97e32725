"""`evaluate`-compatible metric modules shipped with trl_ext (load them offline by path)."""

from pathlib import Path

PASS_AT_K = str(Path(__file__).parent / "pass_at_k" / "pass_at_k.py")

__all__ = ["PASS_AT_K"]
