"""The graph/action specs benchmarks size models with: a registered domain's own, or a frozen snapshot of it.

``benchmark_specs(domain)`` builds the domain's specs when the full stack (pydantic, contracts) is importable; on a
machine with only torch and PyG (the GPU box) it loads ``benchmarks/results/<domain>_specs.json``, written by
``python benchmarks/specs.py <domain>`` from the real specs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentic_ray.graph_spec import ActionLayout, GraphSpec, specs_from_dict, specs_to_dict

SNAPSHOT = Path(__file__).resolve().parent / "results" / "{domain}_specs.json"


def benchmark_specs(domain: str = "ecommerce") -> tuple[GraphSpec, ActionLayout, str]:
    """``(graph_spec, action_layout, source)``: the domain's specs, or the snapshot when they cannot be built."""
    try:
        from agentic_ray.envs.agent_task_env import AgentTaskEnv

        env = AgentTaskEnv({"domain": domain})
        return env.graph_spec, env.layout, f"agentic_ray/{domain}-v1"
    except ImportError:
        path = Path(str(SNAPSHOT).format(domain=domain))
        return (*specs_from_dict(json.loads(path.read_text())), str(path))


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "ecommerce"
    spec, layout, _ = benchmark_specs(name)
    out = Path(str(SNAPSHOT).format(domain=name))
    out.write_text(json.dumps(specs_to_dict(spec, layout), indent=1))
    print(f"wrote {out}")
