"""Action prototypes mined from successful expert traces (seed 002: K-means over successful steps).

A prototype fixes a skill, its enum arguments and a numeric rule; the env *grounds* it to a concrete structured
action at step time (see :meth:`AgentTaskEnv.ground_prototype`): entity arguments bind to the entities of the
most urgent pending goal that asks for this skill (and these enum values), and the numeric argument is
``numeric_ratio × the goal's numeric target`` (or ``numeric_frac`` of the bound range when no goal gives one).

Mining: every successful expert step becomes a vector ``[skill one-hot (K) | enum one-hot per slot | ratio]``;
K-means (scikit-learn) clusters them and each centre is decoded to the nearest (skill, enum) signature. By
default the number of clusters is the number of distinct signatures, so every successful step pattern keeps a
prototype; a smaller ``n_prototypes`` merges rare patterns into frequent ones. The shipped set adds one
escalation prototype (``human.handoff``), which clean expert traces never contain.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans

from agentic_ray.envs.graph_spec import ActionLayout

PROTOTYPES_PATH = Path(__file__).resolve().parents[1] / "data" / "ecommerce_prototypes.json"


@dataclass(frozen=True)
class Prototype:
    """One action prototype.

    Attributes:
        skill: skill name.
        enum: enum slot values (one per enum slot of the skill).
        numeric_ratio: numeric argument as a multiple of the grounded goal's target.
        numeric_frac: numeric argument as a share of its bound range when no goal target exists.
        support: expert steps in the cluster.
    """

    skill: str
    enum: tuple[int, ...]
    numeric_ratio: float = 1.0
    numeric_frac: float = 0.5
    support: int = 0


@dataclass(frozen=True)
class ExpertStep:
    """A successful expert step, as mined."""

    skill: str
    enum: tuple[int, ...]
    numeric_ratio: float
    numeric_frac: float


def _vector(layout: ActionLayout, s: ExpertStep) -> np.ndarray:
    k, em = layout.num_skills, layout.enum_max
    v = np.zeros(k + em * layout.enum_slots + 1)
    v[layout.skill_index(s.skill)] = 1.0
    for j, e in enumerate(s.enum):
        v[k + j * em + e] = 1.0
    v[-1] = s.numeric_ratio
    return v


def mine_prototypes(
    steps: list[ExpertStep], layout: ActionLayout, n_prototypes: int | None = None, seed: int = 0
) -> list[Prototype]:
    """K-means over expert step vectors, decoded to prototypes (most supported first).

    Args:
        steps: successful expert steps.
        layout: the structured action layout.
        n_prototypes: clusters; default the number of distinct (skill, enum) signatures.
        seed: K-means seed.
    """
    if not steps:
        raise ValueError("no expert steps to mine")
    sigs = Counter((s.skill, s.enum) for s in steps)
    k = min(n_prototypes or len(sigs), len(sigs))
    x = np.stack([_vector(layout, s) for s in steps])
    km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(x)
    protos: list[Prototype] = []
    for c in range(k):
        members = [s for s, lab in zip(steps, km.labels_, strict=True) if lab == c]
        skill, enum = Counter((s.skill, s.enum) for s in members).most_common(1)[0][0]
        same = [s for s in members if (s.skill, s.enum) == (skill, enum)]
        protos.append(
            Prototype(
                skill=skill,
                enum=tuple(int(e) for e in enum),
                numeric_ratio=round(float(np.mean([s.numeric_ratio for s in same])), 6),
                numeric_frac=round(float(np.mean([s.numeric_frac for s in same])), 6),
                support=len(members),
            )
        )
    protos.sort(key=lambda p: (-p.support, p.skill, p.enum))
    return protos


def save_prototypes(protos: list[Prototype], path: str | Path = PROTOTYPES_PATH) -> None:
    Path(path).write_text(json.dumps([asdict(p) for p in protos], indent=1))


def load_prototypes(path: str | Path | None = None) -> list[Prototype]:
    """The shipped prototypes (``agentic_ray/data/ecommerce_prototypes.json``) or another file."""
    raw = json.loads(Path(path or PROTOTYPES_PATH).read_text())
    return [Prototype(**{**p, "enum": tuple(p["enum"])}) for p in raw]


def collect_expert_steps(n_per_family: int = 30, seed: int = 0) -> list[ExpertStep]:
    """Run the scripted expert (structured mode, no faults) on training tasks and keep its successful steps."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
    from agentic_ray.envs.ecommerce_tasks import FAMILIES, draw_training_seed
    from agentic_ray.envs.expert import ScriptedExpert

    env = AgentTaskEnv(AgentTaskEnvConfig())
    expert = ScriptedExpert()
    rng = np.random.default_rng(seed)
    out: list[ExpertStep] = []
    for fam in FAMILIES:
        for _ in range(n_per_family):
            env.reset(
                seed=int(rng.integers(2**31)), options={"family": fam, "task_seed": draw_training_seed(rng)}
            )
            done = False
            while not done:
                skill, params = expert.plan(env)
                _, _, term, trunc, info = env.step(env.encode_action(skill, params))
                done = term or trunc
                if info["trace"]["result_code"] == "OK":
                    out.append(env.describe_step(skill, params))
    env.close()
    return out


def main() -> None:  # pragma: no cover - maintenance entry point
    """Re-mine the shipped prototypes: ``python -m agentic_ray.envs.prototypes``."""
    from agentic_ray.envs.ecommerce import ecommerce_specs

    _, layout = ecommerce_specs()
    protos = mine_prototypes(collect_expert_steps(), layout)
    # Escalation never appears in clean expert traces, but the policy must always be able to hand off.
    protos.append(Prototype("human.handoff", (0,), support=0))
    save_prototypes(protos)
    print(f"{len(protos)} prototypes → {PROTOTYPES_PATH}")


if __name__ == "__main__":  # pragma: no cover
    main()
