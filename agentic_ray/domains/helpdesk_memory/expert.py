"""The scripted expert of the memory tasks: the help-desk expert, recalling from memory what the caller means.

When a goal names an entity the agent does not know and the task's key fact says the caller meant it in an
earlier conversation, the expert searches memory with the caller's words (request fact ``recall``) instead of
listing the caller's assets: the listing shows every asset of that kind and cannot say which one is meant, the
search reveals the remembered ones with the best hit first. The rest is the help-desk expert's plan.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.helpdesk.expert import HelpdeskExpert
from agentic_ray.domains.helpdesk_memory.tasks import RECALL_FACT
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.memory.memory_skills import SEARCH


class HelpdeskMemoryExpert(HelpdeskExpert):
    """Optimal scripted policy for the memory families (see the module docstring)."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        step = super().plan(view)
        k, facts = view.knowledge, view.task.request.facts
        unknown = [
            f["value"]
            for f in view.task.key_facts
            if not k.knows(str(f["slot"]).removesuffix("_id"), str(f["value"]))
        ]
        if unknown and k.ids("employee") and RECALL_FACT in facts and step[0] not in ("escalate_to_tier2",):
            if view.allowed(SEARCH) and not any(c.skill == SEARCH for c in view.history):
                return SEARCH, {"query": facts[RECALL_FACT]}
        return step
