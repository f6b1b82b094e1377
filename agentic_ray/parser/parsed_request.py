"""What the goal parser returns: the goal DAG, facts, mentioned entities, spans, a confidence, or a clarification."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.protocol import EntityRef, Request, Task

FactValue = str | tuple[str, ...]
"""One fact's value: a string, or several values when the customer gave more than one (``Request.facts``)."""

__all__ = ["Clarify", "ParsedRequest", "SlotSpan"]


@dataclass(frozen=True)
class SlotSpan:
    """Where one slot value came from.

    Attributes:
        slot: the slot (an entity slot, an enum slot or a fact key).
        value: the normalised value (an id, an enum value, a fact string).
        turn: index of the turn: ``0 .. len(history) - 1`` for the history, ``len(history)`` for the text.
        start: first character of the span in that turn.
        end: one past its last character.
        subtask: index of the subtask the slot fills (None for facts and unassigned slots).
        confidence: the tagger's mean probability over the span's tokens.
    """

    slot: str
    value: str
    turn: int
    start: int
    end: int
    subtask: int | None = None
    confidence: float = 1.0


@dataclass(frozen=True)
class Clarify:
    """The parse is not complete enough to act on: what to ask the customer.

    Attributes:
        reason: ``missing_slots`` (a needed slot was not given) or ``unsure`` (the family is uncertain).
        missing: slots that must be given (e.g. ``("order",)``), per the families' templates (for ``unsure``,
            those of the likeliest reading).
        identity_options: for a missing identity, the fact sets any one of which identifies the customer
            (e.g. ``(("email",), ("name", "zip"))``); empty when the identity is given.
        families: the family (or families) the parser believes the request is about.
    """

    reason: Literal["missing_slots", "unsure"]
    missing: tuple[str, ...] = ()
    identity_options: tuple[tuple[str, ...], ...] = ()
    families: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParsedRequest:
    """A parsed customer request.

    Attributes:
        domain: the domain it was parsed for.
        families: the task families, in the order the customer raised them (two for a composite request).
        family: the task family label (the domain's composite family when several were raised).
        goals: the goal DAG built from the families' templates and the slots (empty when ``clarify`` is set).
            Arguments the text cannot give (ids found by lookups, amounts) are left out: the agent finds them.
        facts: values the customer gave (email, name, zip code...).
        mentioned: entities named by id.
        slots: every extracted slot with its span.
        confidence: the chosen families' share of the family classifier's probability mass (one-vs-rest
            probabilities summed over all families); for several requests, the lowest share. In [0, 1].
        clarify: what to ask when the request cannot be acted on, else None.
    """

    domain: str
    families: tuple[str, ...]
    family: str
    goals: tuple[Goal, ...]
    facts: dict[str, FactValue]
    mentioned: tuple[EntityRef, ...]
    slots: tuple[SlotSpan, ...]
    confidence: float
    clarify: Clarify | None = None
    text: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (goals as :class:`~agentic_ray.domains.goal_dag.Goal` fields)."""
        d = dataclasses.asdict(self)
        d["mentioned"] = [{"type": m.type, "id": m.id} for m in self.mentioned]
        return d

    def given_task(self, drawn: Task) -> Task:
        """The task an agent is given when it acts on this parse in ``drawn``'s simulated world.

        The request, the families and the goal DAG are the parse's; what belongs to the world is ``drawn``'s: its
        seed, step budget, relevant entities, how it ends, its domain data, and each goal's arguments that text
        cannot state (ids a lookup finds, amounts), which the domain needs to judge the goal. A goal's arguments
        the parse states win, so a misread id is judged as the customer's words say it. The observation shows a
        goal's enum arguments and the entities the request names, never the rest (:mod:`agentic_ray.envs.
        observation`), so on a right parse the agent sees what the structured goal shows.

        Raises:
            ValueError: the parse asks for a clarification (no goals to act on), or names a goal the drawn task
                does not have (the words are about another task than this world's).
        """
        if self.clarify is not None:
            raise ValueError(
                f"the parse asks for a clarification ({self.clarify.reason}): no goals to act on"
            )
        world = {(g.id, g.skill): g for g in drawn.goals}
        foreign = [g.id for g in self.goals if (g.id, g.skill) not in world]
        if foreign:
            raise ValueError(
                f"goals {foreign} of the parse ({'+'.join(self.families)}) are not goals of task "
                f"{drawn.family}/{drawn.seed}: the words are about another task than this world's"
            )
        goals = tuple(
            dataclasses.replace(
                g,
                args={**w.args, **g.args},
                numeric={**w.numeric, **g.numeric},
                hidden_args=w.hidden_args,
                tolerance=w.tolerance,
            )
            for g in self.goals
            for w in (world[(g.id, g.skill)],)
        )
        return dataclasses.replace(
            drawn,
            family=self.family,
            request=self.request,
            goals=goals,
            subtasks=self.families if len(self.families) > 1 else (),
        )

    @property
    def request(self) -> Request:
        """The request as the env and Serve take it (text, facts, mentioned entities)."""
        return Request(text=self.text, facts=dict(self.facts), mentioned=self.mentioned)
