"""The short-term window: the last k turns of the conversation, which is what the observation holds.

Older turns leave the window; what they said stays reachable only through long-term memory and the entity graph,
which is what makes recall an action worth learning. A task whose request should leave the observation the same
way sets ``Task.short_term_window`` (the env moves it with :func:`~agentic_ray.envs.episode.slide_window`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

DEFAULT_K = 6
"""Turns the short-term window holds by default."""


@dataclass(frozen=True)
class Turn:
    """One turn: who spoke, what was said, which entities it named, when (simulated hours)."""

    index: int
    role: str  # customer | agent | tool
    text: str
    entities: tuple[str, ...] = ()
    at_h: float = 0.0


class ShortTermWindow:
    """The last ``k`` turns, oldest first.

    Args:
        k: window length (>= 1).
    """

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self._turns: deque[Turn] = deque(maxlen=k)
        self.seen = 0

    def add(self, turn: Turn) -> Turn | None:
        """Append a turn; returns the turn that left the window (None while it is not full)."""
        if self._turns and turn.index <= self._turns[-1].index:
            raise ValueError(f"turn {turn.index} is not after turn {self._turns[-1].index}")
        left = self._turns[0] if len(self._turns) == self.k else None
        self._turns.append(turn)
        self.seen += 1
        return left

    @property
    def turns(self) -> list[Turn]:
        return list(self._turns)

    def entities(self) -> list[str]:
        """Entities named in the window, in order of last mention (most recent last), without repeats."""
        order: dict[str, None] = {}
        for t in self._turns:
            for e in t.entities:
                order.pop(e, None)
                order[e] = None
        return list(order)
