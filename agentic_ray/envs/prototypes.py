"""Action prototypes mined from successful expert steps (seed 002: K-means over successful steps).

A prototype (:class:`~agentic_ray.envs.action_codec.Prototype`) fixes a skill, its enum arguments and a numeric
rule (the revealed field the numeric argument copies, or a share of its range); the env grounds it to a structured
action from the observation (:meth:`ActionCodec.ground_prototype`).

Mining: every successful expert step becomes a vector ``[skill one-hot (K) | enum one-hot per slot]``; K-means
(scikit-learn) clusters them and each centre is decoded to the most common (skill, enum, source field) signature
of its members. By default the number of clusters is the number of distinct signatures, so every successful step
pattern keeps a prototype; a smaller ``n_prototypes`` merges rare patterns into frequent ones. Every skill of the
layout keeps a prototype (:func:`with_every_skill`): a skill the expert's clean traces never call (an escalation, a
rarely needed write) gets a default one (first enum values, a free number at mid-range), so prototype mode can
always choose it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from agentic_ray.envs.action_codec import Prototype
from agentic_ray.graph_spec import ActionLayout

if TYPE_CHECKING:
    from agentic_ray.envs.agent_task_env import AgentTaskEnv

__all__ = [
    "ExpertStep",
    "Prototype",
    "collect_expert_steps",
    "load_prototypes",
    "mine_prototypes",
    "save_prototypes",
]


@dataclass(frozen=True)
class ExpertStep:
    """A successful expert step, as mined."""

    skill: str
    enum: tuple[int, ...]
    source_field: tuple[str, str] | None
    numeric_frac: float


def _vector(layout: ActionLayout, s: ExpertStep) -> np.ndarray:
    k, em = layout.num_skills, layout.enum_max
    v = np.zeros(k + em * layout.enum_slots)
    v[layout.skill_index(s.skill)] = 1.0
    for j, e in enumerate(s.enum):
        v[k + j * em + e] = 1.0
    return v


def mine_prototypes(
    steps: list[ExpertStep], layout: ActionLayout, n_prototypes: int | None = None, seed: int = 0
) -> list[Prototype]:
    """K-means over expert step vectors, decoded to prototypes (most supported first)."""
    from sklearn.cluster import (
        KMeans,  # imported here: scikit-learn costs seconds to import, envs need it not
    )

    if not steps:
        raise ValueError("no expert steps to mine")
    sigs = Counter((s.skill, s.enum, s.source_field) for s in steps)
    k = min(n_prototypes or len(sigs), len(sigs))
    x = np.stack([_vector(layout, s) for s in steps])
    labels = (
        KMeans(n_clusters=k, n_init=10, random_state=seed).fit(x).labels_
        if k > 1
        else np.zeros(len(steps), int)
    )
    protos: list[Prototype] = []
    for c in range(k):
        members = [s for s, lab in zip(steps, labels, strict=True) if lab == c]
        if not members:
            continue
        skill, enum, src = Counter((s.skill, s.enum, s.source_field) for s in members).most_common(1)[0][0]
        same = [s for s in members if (s.skill, s.enum, s.source_field) == (skill, enum, src)]
        protos.append(
            Prototype(
                skill=skill,
                enum=tuple(int(e) for e in enum),
                source_field=src,
                numeric_frac=round(float(np.mean([s.numeric_frac for s in same])), 6),
                support=len(members),
            )
        )
    protos.sort(key=lambda p: (-p.support, p.skill, p.enum))
    return protos


def with_every_skill(protos: list[Prototype], layout: ActionLayout, skills: Sequence[str]) -> list[Prototype]:
    """``protos`` plus a default prototype (enum values 0, a free numeric argument at mid-range, support 0) for
    each skill of ``skills`` (the layout's skill names, in order) that no prototype uses."""
    have = {p.skill for p in protos}
    return list(protos) + [
        Prototype(name, (0,) * len(layout.skills[k].enum_sizes))
        for k, name in enumerate(skills)
        if name not in have
    ]


def save_prototypes(protos: list[Prototype], path: str | Path) -> None:
    Path(path).write_text(json.dumps([asdict(p) for p in protos], indent=1))


def load_prototypes(path: str | Path) -> list[Prototype]:
    """Prototypes from a JSON file (a domain ships ``data/prototypes.json``)."""
    raw = json.loads(Path(path).read_text())
    return [
        Prototype(
            skill=p["skill"],
            enum=tuple(p["enum"]),
            source_field=tuple(p["source_field"]) if p.get("source_field") else None,  # type: ignore[arg-type]
            numeric_frac=float(p.get("numeric_frac", 0.5)),
            support=int(p.get("support", 0)),
        )
        for p in raw
    ]


def describe_step(env: AgentTaskEnv, skill: str, params: dict) -> ExpertStep:
    """The mining view of a step: its enum signature and the revealed field its numeric argument copies."""
    assert env.knowledge is not None
    k = env.skills.index(skill)
    src: tuple[str, str] | None = None
    frac = 0.5
    for ps in env.codec.params[k]:
        if ps.kind == "numeric" and ps.name in params:
            c = env.codec.preferred_source(env.knowledge, float(params[ps.name]), ps.spec)
            if c is not None:
                src = env.codec.source_field(c)
            else:
                lo, hi = env.codec.bounds(env.knowledge, params, ps.spec, k)
                frac = (float(params[ps.name]) - lo) / (hi - lo) if hi > lo else 0.5
    return ExpertStep(skill, env.codec.enum_signature(k, params), src, frac)


def collect_expert_steps(domain: str, n_per_family: int = 30, seed: int = 0) -> list[ExpertStep]:
    """Run the domain's expert (structured mode, no faults) on training tasks and keep its successful steps."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
    from agentic_ray.keys import STEP_TRACE

    env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain))
    expert = env.domain.expert()
    rng = np.random.default_rng(seed)
    out: list[ExpertStep] = []
    for fam in env.families:
        for _ in range(n_per_family):
            env.reset(
                seed=int(rng.integers(2**31)),
                options={"family": fam, "task_seed": env.domain.draw_training_seed(rng)},
            )
            done = False
            while not done:
                skill, params = expert.plan(env.view())
                step = describe_step(env, skill, params)
                _, _, term, trunc, info = env.step(env.encode_action(skill, params))
                done = term or trunc
                if info[STEP_TRACE]["result_code"] == "OK":
                    out.append(step)
    env.close()
    return out


def main() -> None:  # pragma: no cover - maintenance entry point
    """Re-mine a domain's prototypes: ``python -m agentic_ray.envs.prototypes <domain>``."""
    import sys

    from agentic_ray.domains import get_domain
    from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig

    name = sys.argv[1] if len(sys.argv) > 1 else "ecommerce"
    d = get_domain(name)
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=name))
    protos = with_every_skill(mine_prototypes(collect_expert_steps(name), env.layout), env.layout, env.skills)
    save_prototypes(protos, d.data_dir / "prototypes.json")
    print(f"{len(protos)} prototypes -> {d.data_dir / 'prototypes.json'}")


if __name__ == "__main__":  # pragma: no cover
    main()
