"""What an episode tells the memory reward and metrics: the key facts the customer gave, and what the agent did
with each (reused it in an argument, or asked for it again).

A *turn* is an env step index (0-based). Simulated time is in hours (``at_h``), the clock the entity graph's
``last_confirmed_h`` uses. These records are ground truth (the value the customer really meant): they feed the L4
memory layer and the Entity Recall@5 / forgetting metrics, never the policy.

The env writes ``MemoryEpisode.to_context()`` under :data:`agentic_ray.keys.CONTEXT_MEMORY_FACTS` of the
episode record; an episode without key facts carries none, and the memory layer then has nothing to score.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

WRITE_SKILL = "memory.write"
"""The memory write skill (:mod:`agentic_ray.memory.memory_skills`): a call of it that fills a key fact's slot is a
``write`` event (the agent noted the fact), not a ``use``; this module names it so that the env can tell without
importing the memory store."""


class KeyFact(BaseModel):
    """One fact the customer stated that a later call needs (an order id, the item they mean, an address)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slot: str = Field(min_length=1, description="What the fact fills: an argument or request-fact name.")
    value: str = Field(description="The value the customer meant (an entity id or a field value).")
    stated_turn: int = Field(ge=0, description="Turn at which the customer stated it.")
    needed_turn: int = Field(ge=0, description="First turn at which a call needs it.")
    confirmed_at_h: float = Field(description="Simulated time (hours) at which it was last confirmed.")
    distractors: tuple[str, ...] | None = Field(
        default=None,
        description="The values the fact could be mistaken for (the look-alikes the customer's words could "
        "mean). When given, a use of the slot with a value neither the fact's nor a distractor's is about another "
        "entity (a task that also acts on another order), so neither a reuse nor a wrong use; None: every use of "
        "the slot is about the fact.",
    )

    def concerns(self, value: str | None) -> bool:
        """Whether a use of the slot with ``value`` (None: an ask) is about this fact (see ``distractors``)."""
        return value is None or self.distractors is None or value == self.value or value in self.distractors

    @model_validator(mode="after")
    def _order(self) -> KeyFact:
        if self.needed_turn < self.stated_turn:
            raise ValueError(f"needed_turn {self.needed_turn} is before stated_turn {self.stated_turn}")
        return self


class FactEvent(BaseModel):
    """What the agent did with a slot at one turn: put ``value`` into a call (``use``), into a memory note
    (``write``: noted for later, not reused; the reward and the metrics read uses and asks only), or asked the
    customer (``ask``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    turn: int = Field(ge=0, description="Turn of the event.")
    slot: str = Field(min_length=1, description="The slot used or asked for.")
    kind: Literal["use", "write", "ask"] = Field(
        description="`use`: a call argument was filled; `write`: a memory note named it; `ask`: asked again."
    )
    value: str | None = Field(default=None, description="The value used (None for an ask).")
    at_h: float = Field(default=0.0, description="Simulated time (hours) of the event.")

    @model_validator(mode="after")
    def _value(self) -> FactEvent:
        if (self.kind != "ask") != (self.value is not None):
            raise ValueError("a `use` or `write` carries the value, an `ask` none")
        return self


class MemoryEpisode(BaseModel):
    """The key facts of one episode and the agent's events, in any order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    facts: list[KeyFact] = Field(default_factory=list, description="Key facts the customer gave.")
    events: list[FactEvent] = Field(default_factory=list, description="Uses and asks of slots by the agent.")

    def to_context(self) -> dict[str, Any]:
        """A plain, picklable dict for ``EpisodeRecord.context``."""
        return self.model_dump()

    @classmethod
    def from_context(cls, value: Any) -> MemoryEpisode:
        """Read what :meth:`to_context` wrote."""
        return cls.model_validate(value)

    def after(self, fact: KeyFact, kind: str) -> list[FactEvent]:
        """The agent's events of ``kind`` on ``fact``'s slot after it was stated, by turn (the uses about it: see
        :attr:`KeyFact.distractors`)."""
        out = [
            e
            for e in self.events
            if e.slot == fact.slot and e.kind == kind and e.turn > fact.stated_turn and fact.concerns(e.value)
        ]
        return sorted(out, key=lambda e: e.turn)
