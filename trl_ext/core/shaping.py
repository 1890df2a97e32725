"""Reward shaping terms."""

from __future__ import annotations

import torch


def overlong_penalty(
    lengths: torch.Tensor, max_length: int, cache_length: int, max_penalty: float = 1.0
) -> torch.Tensor:
    """Soft overlong punishment (DAPO, arXiv 2503.14476 §3.4 Eq. 13), scaled by ``max_penalty``.

    With L_max = max_length and L_cache = cache_length:
      0                                              if L ≤ L_max − L_cache
      max_penalty · ((L_max − L_cache) − L) / L_cache  if L_max − L_cache < L ≤ L_max
      −max_penalty                                   if L > L_max
    DAPO uses max_penalty = 1; Magistral (arXiv 2506.10910 §2.2) uses 0.1.
    """
    if not isinstance(lengths, torch.Tensor):
        raise ValueError(f"`lengths` must be a tensor, got {type(lengths).__name__}.")
    if max_length <= 0:
        raise ValueError(f"`max_length` must be > 0, got {max_length}.")
    if cache_length < 0 or cache_length > max_length:
        raise ValueError(f"`cache_length` must lie in [0, max_length={max_length}], got {cache_length}.")
    if max_penalty < 0:
        raise ValueError(f"`max_penalty` must be >= 0, got {max_penalty}.")
    lengths = lengths.to(torch.float64)
    threshold = max_length - cache_length
    ramp = (threshold - lengths) / max(cache_length, 1)
    penalty = torch.where(lengths <= threshold, torch.zeros_like(lengths), ramp)
    penalty = torch.where(lengths > max_length, torch.full_like(lengths, -1.0), penalty)
    return (max_penalty * penalty).to(torch.get_default_dtype())
