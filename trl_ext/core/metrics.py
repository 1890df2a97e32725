"""Evaluation metrics."""

from __future__ import annotations

import torch


def pass_at_k(num_samples: torch.Tensor, num_correct: torch.Tensor, k: int) -> torch.Tensor:
    """Unbiased pass@k per problem (Chen et al. 2021, arXiv 2107.03374 §2.1, Eq. 1).

    pass@k = 1 − C(n − c, k) / C(n, k) for n samples of which c are correct, computed as the stable product
    1 − Π_{i=n−c+1}^{n} (1 − k / i); it is 1 when n − c < k. Requires k ≤ n.
    """
    n = torch.as_tensor(num_samples, dtype=torch.float64)
    c = torch.as_tensor(num_correct, dtype=torch.float64)
    if n.shape != c.shape:
        raise ValueError(f"`num_correct` has shape {tuple(c.shape)} but `num_samples` has {tuple(n.shape)}.")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"`k` must be a positive int, got {k!r}.")
    if (n < k).any():
        raise ValueError(f"`k`={k} exceeds the number of samples of some problem (min {int(n.min())}).")
    if ((c < 0) | (c > n)).any():
        raise ValueError("`num_correct` must lie in [0, num_samples] for every problem.")
    result = torch.empty_like(n)
    for index, (total, correct) in enumerate(zip(n.reshape(-1).tolist(), c.reshape(-1).tolist(), strict=True)):
        if total - correct < k:
            result.view(-1)[index] = 1.0
            continue
        i = torch.arange(total - correct + 1, total + 1, dtype=torch.float64)
        result.view(-1)[index] = 1.0 - torch.prod(1.0 - k / i)
    return result
