"""The scripted expert of the memory tasks: the help-desk expert, writing to memory what the caller means as the
conversation goes, and recalling it when the observation no longer says which entity that is
(:func:`~agentic_ray.memory.memory_expert.memory_step`; a search replaces the listing of the caller's assets or
tickets). The rest is the help-desk expert's plan (after a failed search too).
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.helpdesk.expert import LISTING, HelpdeskExpert
from agentic_ray.domains.helpdesk_memory.tasks import RECALL_FACT
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.memory.memory_expert import memory_step


class HelpdeskMemoryExpert(HelpdeskExpert):
    """Optimal scripted policy for the memory families (see the module docstring)."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        return memory_step(view, super().plan(view), LISTING.values(), RECALL_FACT)
