"""Fit a domain's quantile tables from sampled worlds (through the protocol only).

Every ``number`` field of the schema is sampled from the ground truth of every entity of sampled training tasks
(``Domain.entity_fields``); tool latency and error-rate samples come from the worlds' simulated tool health and
from the error-injection rates, so faulty episodes land inside the fitted range. Refit a shipped table with
``python -m agentic_ray.domains.quantile_fit <domain> <out.json>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from agentic_ray.domains.protocol import Domain
from agentic_ray.domains.quantile_map import QuantileMap

TOOL_LATENCY = "tool.latency_ms"
TOOL_ERROR_RATE = "tool.error_rate"


def quantile_key(entity_type: str, field: str) -> str:
    """The table entry of a number field."""
    return f"{entity_type}.{field}"


def fit_quantiles(domain: Domain, n_tasks: int = 2000, seed: int = 0) -> QuantileMap:
    """Quantile tables of every number field of ``domain`` plus tool latency and error rate."""
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {TOOL_LATENCY: [], TOOL_ERROR_RATE: []}
    numbers = [(t.name, f.name) for t in domain.schema.entity_types for f in t.fields if f.kind == "number"]
    for t, f in numbers:
        samples[quantile_key(t, f)] = []
    for _ in range(n_tasks):
        fam = domain.families[int(rng.integers(len(domain.families)))]
        world, _task = domain.make_task(fam, domain.draw_training_seed(rng))
        for t, f in numbers:
            for eid in domain.entity_ids(world, t):
                v = (domain.entity_fields(world, t, eid) or {}).get(f)
                if isinstance(v, int | float) and not isinstance(v, bool):
                    samples[quantile_key(t, f)].append(float(v))
        for lat, std, fr in domain.tool_health(world).values():
            samples[TOOL_LATENCY].append(max(0.0, rng.normal(lat, std)))
            samples[TOOL_ERROR_RATE].append(fr if rng.random() < 0.7 else rng.uniform(0.0, 1.0))
    samples[TOOL_LATENCY] += [0.0] * max(1, len(samples[TOOL_LATENCY]) // 10)  # in-process calls, no latency
    samples[TOOL_ERROR_RATE] += [0.0, 1.0]
    return QuantileMap.fit({k: v or [0.0] for k, v in samples.items()})


def main() -> None:  # pragma: no cover - maintenance entry point
    from agentic_ray.domains import get_domain

    name, out = sys.argv[1], Path(sys.argv[2])
    fit_quantiles(get_domain(name)).to_json(out)
    print(f"quantiles of {name} -> {out}")


if __name__ == "__main__":  # pragma: no cover
    main()
