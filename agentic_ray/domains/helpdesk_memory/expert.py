"""The scripted expert of the memory tasks: the help-desk expert, recalling from memory what the caller means.

Where the help-desk expert would list the caller's assets to find one a goal names, and the task's key fact (the
entity the caller meant in an earlier conversation) is still unknown, this expert searches memory once with the
caller's words (request fact ``recall``) instead: the listing shows every asset of that kind and cannot say which
one is meant, the search reveals the remembered ones with the best hit first. The rest is the help-desk expert's
plan (after a failed search too: it then lists).
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.helpdesk.expert import LISTING, HelpdeskExpert
from agentic_ray.domains.helpdesk_memory.tasks import RECALL_FACT
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.memory.memory_skills import SEARCH


class HelpdeskMemoryExpert(HelpdeskExpert):
    """Optimal scripted policy for the memory families (see the module docstring)."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        step = super().plan(view)
        k, facts = view.knowledge, view.task.request.facts
        meant_unknown = any(
            not k.knows(str(f["slot"]).removesuffix("_id"), str(f["value"])) for f in view.task.key_facts
        )
        listing = step[0] in LISTING.values()
        searched = any(c.skill == SEARCH for c in view.history)
        if listing and meant_unknown and RECALL_FACT in facts and not searched and view.allowed(SEARCH):
            return SEARCH, {"query": facts[RECALL_FACT]}
        return step
