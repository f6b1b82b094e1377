"""How a domain writes its tasks as customer requests: the training material of the goal parser.

A domain opts in with a module ``<its package>.renderings`` that defines ``RENDERINGS``, a :class:`Renderings`
(or with a ``renderings`` attribute on the domain object). The goal parser (:mod:`agentic_ray.parser`) reads only
this structure and :class:`~agentic_ray.domains.protocol.Domain`, so it names no domain.

A template is a sentence (or two) with ``{slot}`` fields. Entity slots are filled with the id verbatim; enum slots
with one of the phrases of their value (``value_phrases``); fact slots (the keys of ``Request.facts``) verbatim.
The parser learns which goal argument each slot fills by drawing tasks (:meth:`Renderings.slots` gives the slot
values of each subtask), so a template never restates the goal DAG.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field

from agentic_ray.domains.protocol import Task

__all__ = ["Renderings", "template_slots"]


def template_slots(template: str) -> tuple[str, ...]:
    """The ``{slot}`` names of a template, in order."""
    return tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)


@dataclass(frozen=True)
class Renderings:
    """A domain's request templates and slot vocabulary.

    Attributes:
        templates: family -> templates (at least 4 per family, so a held-out split leaves training some). A
            family whose tasks sometimes leave a slot out (an order the customer does not name) has templates
            without that slot; a template is used for a subtask only if its slots equal the subtask's slots.
        entity_slots: slot -> entity type of the domain schema (an order id, a SKU, a ticket id).
        value_phrases: enum slot -> value -> phrases that say it ("a parcel locker" for ``pickup_point``).
        fact_templates: sentences that give the customer's identity, with fact slots (``{email}``,
            ``{name}`` and ``{zip}``); one is used per request, the one whose slots equal the task's facts.
        slots: the slot values of each subtask of a task, in the order the customer raises them (one dict for a
            simple task, one per subtask for a composite one). Keys are template slots (not facts).
        composite_families: families whose tasks combine several simple ones (``Task.subtasks``).
    """

    templates: dict[str, tuple[str, ...]]
    entity_slots: dict[str, str]
    value_phrases: dict[str, dict[str, tuple[str, ...]]]
    fact_templates: tuple[str, ...]
    slots: Callable[[Task], list[dict[str, str]]]
    composite_families: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for fam, ts in self.templates.items():
            for t in ts:
                unknown = set(template_slots(t)) - set(self.entity_slots) - set(self.value_phrases)
                if unknown:
                    raise ValueError(f"template of {fam!r} has undeclared slots {sorted(unknown)}: {t!r}")
