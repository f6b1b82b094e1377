"""Failure evidence: what a caller sees of a failed call, the reflection module's input (issue 13, section 4).

:func:`failure_evidence` turns the last step into the ``failure_evidence`` observation (layout in
:mod:`agentic_ray.graph_spec`: :data:`~agentic_ray.graph_spec.EVIDENCE_FLAGS`, the result-code class, the failed
skill). Every entry is agent-observable: the call the agent sent (its skill and arguments), the result code the
gateway returned, and what the agent had learned before (its :class:`~agentic_ray.domains.knowledge.Knowledge`).
Nothing comes from the world's hidden state, so the env and the Serve endpoint (which replays a transcript,
:mod:`agentic_ray.envs.transcript`) compute it with this one function from the same inputs.

Where it goes: into the reflection head only (the root-cause classifier, :mod:`agentic_ray.models.reflection`),
never into the policy's own state. The policy conditions on the head's predicted cause instead, as seed 000's
separate reflection module; were the raw evidence in the policy's state, the ablation that zeroes the reflection
input would leave the policy everything the diagnosis is made from, and Correction Uplift could only measure ~0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.graph_spec import EVIDENCE_FLAGS, FAILURE_CODE_CLASSES, evidence_width
from agentic_ray.skills.contracts import EntityListParam, EntityParam, FloatParam, IntParam, SkillContract

__all__ = ["failure_evidence"]

_FLAG = {f: i for i, f in enumerate(EVIDENCE_FLAGS)}
_CODE = {code: len(EVIDENCE_FLAGS) + j for j, codes in enumerate(FAILURE_CODE_CLASSES) for code in codes}
_SKILLS = len(EVIDENCE_FLAGS) + len(FAILURE_CODE_CLASSES)
_EPS = 1e-6


def failure_evidence(
    num_skills: int,
    skill_index: int,
    contract: SkillContract | None,
    params: dict[str, Any],
    code: str,
    knowledge: Knowledge,
) -> np.ndarray:
    """The ``failure_evidence`` vector of a step (all zeros when it succeeded).

    Args:
        num_skills: ``K``, the skills of the action layout.
        skill_index: the called skill's index (< 0 for an invalid action).
        contract: the called skill's contract (None for an invalid action).
        params: the arguments the call carried (what was sent, after any clipping by the gateway).
        code: the result code (``"OK"`` for a success).
        knowledge: what the agent knew when the result came back (a failed call reveals nothing).

    Returns:
        float32 ``(evidence_width(K),)``.
    """
    out = np.zeros(evidence_width(num_skills), dtype=np.float32)
    if code == "OK":
        return out
    out[_FLAG["failed"]] = 1.0
    if code in _CODE:
        out[_CODE[code]] = 1.0
    if 0 <= skill_index < num_skills:
        out[_SKILLS + skill_index] = 1.0
    if contract is None:
        return out
    refs: list[tuple[str, str]] = []
    for name, p in contract.input.items():
        if isinstance(p, EntityParam | EntityListParam):
            v = params.get(name)
            refs += [(p.node_type, str(x)) for x in (v if isinstance(v, list) else [v]) if x is not None]
    if any(not knowledge.knows(t, i) for t, i in refs):
        out[_FLAG["unknown_entity"]] = 1.0
    if refs and all(not knowledge.fields(t, i) for t, i in refs):
        out[_FLAG["entity_unread"]] = 1.0
    for name, p in contract.input.items():
        v = params.get(name)
        if not isinstance(p, FloatParam | IntParam) or not isinstance(v, int | float) or isinstance(v, bool):
            continue
        limit_field = getattr(p, "max_from", None)
        if not isinstance(limit_field, str):
            continue
        for t, i in refs:
            limit = knowledge.fields(t, i).get(limit_field)
            if (
                isinstance(limit, int | float)
                and not isinstance(limit, bool)
                and float(v) > float(limit) + _EPS
            ):
                out[_FLAG["above_known_limit"]] = 1.0
    return out
