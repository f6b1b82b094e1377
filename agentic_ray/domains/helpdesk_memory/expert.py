"""The scripted expert of the memory tasks: the help-desk expert, writing to memory what the caller means as the
conversation goes, and recalling it when the observation no longer says which entity that is.

A task's key fact (the entity the caller means) is *identifiable* while the request names it (it is still in the
short-term window) or once a memory search returned it as a hit; the expert reads the goals' ground truth, but acts
only on an identifiable entity:

* **write**: as soon as the key fact's entity is identifiable and memory may be written (the caller is
  identified), it is written once, with the caller's words (request fact ``recall``) as the note and a pointer to
  the entity: ``memory.write`` through the same gateway and audit as any call;
* **recall**: where the help-desk expert would list the caller's assets or tickets to find it, or would call a
  skill on it, and it is not identifiable (never named in this conversation, or the window has dropped the
  request's words), the expert searches memory once with the caller's words instead: a listing shows every entity of
  that kind and cannot say which one is meant; the search reveals the remembered ones with the best hit first.

The rest is the help-desk expert's plan (after a failed search too).
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.helpdesk.expert import LISTING, HelpdeskExpert
from agentic_ray.domains.helpdesk_memory.tasks import RECALL_FACT
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.memory.memory_skills import HIT_SCORE, SEARCH, WRITE, pointer_param


class HelpdeskMemoryExpert(HelpdeskExpert):
    """Optimal scripted policy for the memory families (see the module docstring)."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        step = super().plan(view)
        k, facts = view.knowledge, view.task.request.facts
        if RECALL_FACT not in facts:
            return step
        searched = any(c.skill == SEARCH for c in view.history)
        for f in view.task.key_facts:
            node_type, value = str(f["slot"]).removesuffix("_id"), str(f["value"])
            pointer = pointer_param(node_type)
            named = (node_type, value) in k.mentioned or HIT_SCORE in k.fields(node_type, value)
            if named and not view.succeeded(WRITE, **{pointer: value}) and view.allowed(WRITE):
                return WRITE, {"note": facts[RECALL_FACT], pointer: value}
            needed = step[0] in LISTING.values() or step[1].get(pointer) == value
            if needed and not named and not searched and view.allowed(SEARCH):
                return SEARCH, {"query": facts[RECALL_FACT]}
        return step
