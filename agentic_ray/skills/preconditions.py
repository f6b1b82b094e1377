"""Business preconditions (a contract's ``preconditions:``): one definition for every place that checks them.

The in-process gateway (:class:`~agentic_ray.skills.executor.ToolExecutor`), the HTTP skill server and, later,
the env's action mask all call :func:`unmet_precondition`, so a rule holds or fails the same way whichever path
a call takes. The function is pure: it reads a contract, the call's (validated) parameters and the history of
earlier *real* successes, and says why the call may not run.

Only real successes belong in a history: a degraded reply (a fallback rule's canned answer, another skill's
substitute answer) never satisfies a precondition, so callers record only the skill that actually ran, with
its own parameters and payload. :class:`CallHistory` is the bounded, thread-safe store both hosts use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentic_ray.skills.contracts import SkillContract


@dataclass(frozen=True)
class CallRecord:
    """One real, successful call: the skill that ran, its validated params and its payload."""

    skill: str
    params: Mapping[str, Any]
    payload: Mapping[str, Any]


def unmet_precondition(
    contract: SkillContract, params: Mapping[str, Any], history: Sequence[CallRecord]
) -> str | None:
    """Why ``contract``'s preconditions do not hold for a call with ``params``, or None when they all hold.

    A precondition ``{after, where, same}`` holds when some earlier record ran ``after``, its payload has every
    ``where`` field with the given value, and its params equal this call's params on every ``same`` name.

    Args:
        contract: the skill about to run.
        params: its validated parameters.
        history: earlier real successes of the same intent (or world), oldest first.

    Returns:
        The first unmet precondition's description (or a generated sentence), or None.
    """
    for pc in contract.preconditions:
        if not any(
            r.skill == pc.after
            and all(r.payload.get(k) == v for k, v in pc.where.items())
            and all(r.params.get(k) == params.get(k) for k in pc.same)
            for r in history
        ):
            cond = f" with {pc.where}" if pc.where else ""
            same = f" for the same {', '.join(pc.same)}" if pc.same else ""
            return pc.description or f"{contract.name} requires a prior successful {pc.after}{cond}{same}"
    return None


class CallHistory:
    """Real successes by key (an intent id, or ``(world_id, intent_id)`` on the server), bounded both ways.

    Args:
        max_keys: how many keys' histories to keep; the least recently used is dropped first.
        max_records: records kept per key (the oldest go first), so a long-lived key, e.g. direct calls to a
            server without an intent id, cannot grow without bound.
    """

    def __init__(self, max_keys: int = 10_000, max_records: int = 1_000) -> None:
        self.max_keys = max_keys
        self.max_records = max_records
        self._d: OrderedDict[Hashable, deque[CallRecord]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, key: Hashable, rec: CallRecord) -> None:
        with self._lock:
            h = self._d.get(key)
            if h is None:
                h = self._d[key] = deque(maxlen=self.max_records)
            h.append(rec)
            self._d.move_to_end(key)
            while len(self._d) > self.max_keys:
                self._d.popitem(last=False)

    def get(self, key: Hashable) -> list[CallRecord]:
        """A snapshot of the key's records (empty when unknown)."""
        with self._lock:
            return list(self._d.get(key, ()))

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._d.pop(key, None)

    def forget_where(self, pred: Any) -> None:
        """Drop every key for which ``pred(key)`` is true (e.g. all intents of a deleted world)."""
        with self._lock:
            for k in [k for k in self._d if pred(k)]:
                del self._d[k]
