"""Quantile mapping of numeric features to [0, 1] (seed 002: numbers by quantile, not min-max).

A feature's value ``x`` maps to its empirical CDF, linearly interpolated between fitted quantiles, so heavy-tailed
values (balances, latencies) spread over [0, 1] instead of collapsing near 0. Values outside the fitted range map
to 0 or 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

_interp: Any
try:  # np.interp's compiled core: what it calls for real tables without a period, minus ~3 us of Python checks
    from numpy._core.multiarray import interp as _interp
except ImportError:  # another NumPy layout: the public function, same values
    _interp = None


class QuantileMap:
    """Per-feature quantile tables.

    Args:
        quantiles: feature name → non-decreasing array of quantile values (at evenly spaced levels in [0, 1]).
    """

    def __init__(self, quantiles: Mapping[str, ArrayLike]) -> None:
        self.xp: dict[str, np.ndarray] = {}
        self.fp: dict[str, np.ndarray] = {}
        for name, q in quantiles.items():
            q = np.asarray(q, dtype=np.float64)
            levels = np.linspace(0.0, 1.0, len(q))
            # Collapse repeated quantiles (point masses such as 0 days late) to their mean level.
            xs, inv = np.unique(q, return_inverse=True)
            fs = np.bincount(inv, weights=levels) / np.bincount(inv)
            if len(xs) == 1:
                xs, fs = np.array([xs[0], xs[0] + 1e-9]), np.array([0.5, 1.0])
            self.xp[name], self.fp[name] = xs, fs

    def __call__(self, name: str, x: ArrayLike) -> np.ndarray:
        """Map values of feature ``name``; shape is preserved, dtype float64."""
        x = np.asarray(x, dtype=np.float64)
        if (
            _interp is not None
        ):  # the tables are real float64 arrays (see __init__): the same call np.interp makes
            return np.asarray(_interp(x, self.xp[name], self.fp[name], None, None))
        return np.asarray(np.interp(x, self.xp[name], self.fp[name]))

    def scalar(self, name: str, x: float) -> float:
        if _interp is not None:
            return float(_interp(x, self.xp[name], self.fp[name], None, None))
        return float(np.interp(x, self.xp[name], self.fp[name]))

    @property
    def names(self) -> list[str]:
        return sorted(self.xp)

    @classmethod
    def fit(cls, samples: Mapping[str, ArrayLike], n_quantiles: int = 33) -> QuantileMap:
        """Fit from samples: ``n_quantiles`` evenly spaced quantiles per feature."""
        levels = np.linspace(0.0, 1.0, n_quantiles)
        return cls({k: np.quantile(np.asarray(v, dtype=np.float64), levels) for k, v in samples.items()})

    def to_json(self, path: str | Path) -> None:
        # Store the raw quantiles (reconstructed from the collapsed tables is lossy), rounded for a small file.
        raw = {k: [round(float(x), 6) for x in self.xp[k]] for k in self.names}
        levels = {k: [round(float(x), 6) for x in self.fp[k]] for k in self.names}
        Path(path).write_text(json.dumps({"xp": raw, "fp": levels}, indent=1))

    @classmethod
    def from_json(cls, path: str | Path) -> QuantileMap:
        d = json.loads(Path(path).read_text())
        m = cls({})
        for k in d["xp"]:
            m.xp[k] = np.asarray(d["xp"][k], dtype=np.float64)
            m.fp[k] = np.asarray(d["fp"][k], dtype=np.float64)
        return m
