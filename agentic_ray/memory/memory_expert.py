"""The memory part of a scripted expert: write what the customer means while it is identifiable, recall it when the
observation no longer says which entity that is. Generic: a memory domain's expert wraps its base expert's step.

A task's key fact (the entity the customer means) is *identifiable* while the request names it (it is still in the
short-term window) or once a memory search returned it as a hit; the expert reads the goals' ground truth, but acts
only on an identifiable entity:

* **write**: as soon as the key fact's entity is identifiable and memory may be written (the customer is
  identified), it is written once, with the customer's words (the request fact the task's recall words are in) as
  the note and a pointer to the entity: ``memory.write`` through the same gateway and audit as any call;
* **recall**: where the base expert would list the customer's entities to find it (a *listing* skill), or would
  call a skill on it, and it is not identifiable (never named in this conversation, or the window has dropped the
  request's words), the expert searches memory once with the customer's words instead: a listing shows every
  entity of that kind and cannot say which one is meant; the search reveals the remembered ones with the best hit
  first.

A key fact that is a value rather than an entity (its slot is no entity pointer: an address preference, the
``source`` of a delivery address) is searched for once, before the call that needs it, where the base expert would
fill that slot with it (the search reveals what memory holds about the recalled entities); it is not written.

Otherwise (and after a failed search too) the base expert's step stands.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.memory.memory_skills import HIT_SCORE, SEARCH, WRITE, pointer_param


def memory_step(
    view: EpisodeView, step: tuple[str, dict[str, Any]], listing: Collection[str], recall_fact: str
) -> tuple[str, dict[str, Any]]:
    """The expert's next call: a memory write or search where the key facts need one, else ``step``.

    Args:
        view: the episode view.
        step: the base expert's next call.
        listing: skills that list the customer's entities of a kind (a search replaces them).
        recall_fact: the request fact holding the customer's words (a task without it needs no memory).
    """
    k, facts = view.knowledge, view.task.request.facts
    if recall_fact not in facts:
        return step
    searched = any(c.skill == SEARCH for c in view.history)
    for f in view.task.key_facts:
        slot, value = str(f["slot"]), str(f["value"])
        node_type = slot.removesuffix("_id")
        if (
            node_type not in k.entity_types
        ):  # a value fact (an address preference): memory holds it, search once
            if step[1].get(slot) == value and not searched and view.allowed(SEARCH):
                return SEARCH, {"query": facts[recall_fact]}
            continue
        pointer = pointer_param(node_type)
        named = (node_type, value) in k.mentioned or HIT_SCORE in k.fields(node_type, value)
        if named and not view.succeeded(WRITE, **{pointer: value}) and view.allowed(WRITE):
            return WRITE, {"note": facts[recall_fact], pointer: value}
        needed = step[0] in listing or step[1].get(pointer) == value
        if needed and not named and not searched and view.allowed(SEARCH):
            return SEARCH, {"query": facts[recall_fact]}
    return step
