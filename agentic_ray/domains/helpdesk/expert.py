"""The scripted help-desk expert: solves every task optimally from the episode view (faults off).

It reads the goals' ground truth but acts under the agent's partial information: it can name only an entity the
request or a lookup revealed. So it identifies the caller (email, else badge), lists the caller's assets or
tickets when a goal names one that is not known yet, then runs the most urgent ready goal. That is exactly the
task's ``optimal_steps``. When the skill it needs is masked (an outage, an open breaker) it escalates.

After a failure the plan itself is the fix (a tool error is retried as is), except after ``wrong_entity`` (the
root cause the env attributed to the last step, the policy's reflection input): the call carried an id the agent
never learned (it holds a look-alike), so the expert first re-resolves that entity with the lookup that reveals
it (the caller by email or badge, an asset or a ticket by listing the caller's), then calls again.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.helpdesk.tasks import gold_call
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.skills.contracts import EntityListParam, EntityParam

LISTING: dict[str, str] = {"asset": "get_assets_for_employee", "ticket": "ticket.search"}
"""How an unknown entity of a type is found: the caller's listing that reveals it."""


class HelpdeskExpert:
    """Optimal scripted policy for the help-desk families (see the module docstring)."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        """The next call as ``(skill, params)``."""
        fix = self._resolve_after_failure(view)
        if fix is not None:
            return fix
        task, k = view.task, view.knowledge
        ready = [i for i in range(len(task.goals)) if view.ready[i]]
        if not ready:
            return self._escalate(view, "complex")
        g = task.goals[min(ready, key=lambda j: (-task.goals[j].priority, j))]
        unknown = [
            p.node_type
            for name, p in view.contracts[g.skill].input.items()
            if isinstance(p, EntityParam | EntityListParam) and name in g.args
            for v in (g.args[name] if isinstance(g.args[name], list) else [g.args[name]])
            if not k.knows(p.node_type, v)
        ]
        if "employee" in unknown or (unknown and not k.ids("employee")):
            step = self._identify(view)
        elif unknown:
            step = LISTING[unknown[0]], {"employee_id": k.ids("employee")[0]}
        else:
            step = g.skill, gold_call(task, g)
        return step if view.allowed(step[0]) else self._escalate(view, "tool_failure")

    def _resolve_after_failure(self, view: EpisodeView) -> tuple[str, dict[str, Any]] | None:
        """The lookup that re-resolves the entity a ``wrong_entity`` step named by an unknown id, else None."""
        last, k = view.last, view.knowledge
        if last is None or last.code == "OK" or last.root_cause != "wrong_entity":
            return None
        for name, p in view.contracts[last.skill].input.items():
            v = last.params.get(name)
            if not isinstance(p, EntityParam) or not isinstance(v, str) or k.knows(p.node_type, v):
                continue
            if p.node_type == "employee" or not k.ids("employee"):
                step = self._identify(view)
            elif p.node_type in LISTING:
                step = LISTING[p.node_type], {"employee_id": k.ids("employee")[0]}
            else:
                continue
            return step if view.allowed(step[0]) else None
        return None

    @staticmethod
    def _identify(view: EpisodeView) -> tuple[str, dict[str, Any]]:
        facts = view.task.request.facts
        if "email" in facts:
            return "lookup_employee_by_email", {"email": facts["email"]}
        return "lookup_employee_by_badge", {"badge": facts.get("badge", "")}

    @staticmethod
    def _escalate(view: EpisodeView, reason: str) -> tuple[str, dict[str, Any]]:
        known = view.knowledge.ids("employee")
        return "escalate_to_tier2", ({"employee_id": known[0]} if known else {}) | {"reason": reason}
