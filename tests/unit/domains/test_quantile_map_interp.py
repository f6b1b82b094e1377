"""QuantileMap's direct call of np.interp's compiled core gives np.interp's values bit for bit."""

from __future__ import annotations

import numpy as np

from agentic_ray.domains import get_domain


def test_quantile_map_equals_np_interp_bitwise() -> None:
    rng = np.random.default_rng(0)
    for domain in ("ecommerce", "helpdesk"):
        qm = get_domain(domain).quantiles()
        for name in qm.names:
            xp, fp = qm.xp[name], qm.fp[name]
            span = float(xp[-1] - xp[0]) or 1.0
            x = np.concatenate(
                (rng.uniform(xp[0] - span, xp[-1] + span, 200), xp, [np.nan, np.inf, -np.inf, -0.0])
            )
            assert qm(name, x).tobytes() == np.interp(x, xp, fp).tobytes()
            for v in x[:50].tolist():
                got, want = qm.scalar(name, v), float(np.interp(v, xp, fp))
                assert got == want or (np.isnan(got) and np.isnan(want))
