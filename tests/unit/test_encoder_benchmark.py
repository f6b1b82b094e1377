"""``benchmarks/encoder.py``'s matrix-product floor: it replays exactly the products a forward issues (counted
and sized from the profiler), not the other operations."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.encoder import matmul_floor


def test_the_floor_counts_and_sizes_the_forwards_products_only() -> None:
    x, w, b = torch.randn(100, 100), torch.randn(100, 100), torch.randn(100)
    q, k = torch.randn(2, 100, 100), torch.randn(2, 100, 50)

    def forward() -> torch.Tensor:
        h = F.gelu(torch.addmm(b, x, w))  # addmm: 100·100·100 = 1M multiply-adds
        h = (h @ torch.randn(100, 200)).tanh()  # mm: 2M
        h = F.linear(h, torch.randn(100, 200))  # mm: 100·200·100 = 2M
        return torch.bmm(q, k).sum() + h.sum()  # bmm: 2·100·100·50 = 1M

    out = matmul_floor(forward, repeats=3)
    assert out["matmuls"] == 4
    assert out["macs_m"] == 6.0
    assert out["matmul_floor_ms"] > 0
