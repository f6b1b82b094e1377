"""Requests in the customer's words: the served domain's goal parser in the gateway (issue 28).

A ``/v1/act`` request without goals, or an agent-mode session started with ``text``, is parsed by the domain's
shipped parser (:mod:`agentic_ray.parser`): the goal DAG, the facts and the entities come from the words. A parse
that is unsure of the family, or lacks a slot its family needs or the customer's identity, is answered with a
typed clarification naming what to ask, never with a guessed action.

The parser (and the sentence embedder under it) is loaded once per replica, on the first text request, in a
worker thread (a few seconds; replicas that never see text never pay it). Parses run one at a time on that
thread, off the event loop: each sets the torch thread count for its embedding (see
:func:`~agentic_ray.parser.goal_parser.torch_threads`), which two concurrent parses would race on.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agentic_ray.domains.goal_dag import Goal
from agentic_ray.parser import GoalParser, ParsedRequest, load_parser
from agentic_ray.serving.live_metrics import LatencyWindow
from agentic_ray.serving.request_check import ClientError

__all__ = ["TextParse", "TextParser", "clarify_response", "goals_in", "parsed_out"]


@dataclass(frozen=True)
class TextParse:
    """One parse in the gateway: the parsed request and its wall time."""

    parsed: ParsedRequest
    ms: float


class TextParser:
    """The served domain's goal parser, loaded once, with the parse counts and latencies ``/v1/metrics`` shows.

    Args:
        domain: the served domain.
        folder: where its parser lies (default: the domain's shipped ``data_dir``).
    """

    def __init__(self, domain: str, folder: str | None = None) -> None:
        self.domain = domain
        self.folder = folder
        self._parser: GoalParser | None = None
        self._loading = asyncio.Lock()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="goal-parser")
        self.latency = LatencyWindow()
        self.counts: Counter[str] = Counter()

    async def parser(self) -> GoalParser:
        """The parser, loaded (and warmed by one parse) on first use.

        Raises:
            ClientError: the domain ships no parser (422: send a structured goal).
        """
        async with self._loading:
            if self._parser is None:
                loop = asyncio.get_running_loop()
                try:
                    self._parser = await loop.run_in_executor(self._thread, self._load)
                except FileNotFoundError as e:
                    raise ClientError(
                        [
                            (
                                ("body",),
                                f"domain {self.domain!r} has no goal parser: send a structured goal ({e})",
                            )
                        ]
                    ) from e
        return self._parser

    def _load(self) -> GoalParser:
        p = load_parser(self.domain, self.folder)
        p.parse("hello")  # loads the embedder, so the first customer's parse is not the slow one
        return p

    async def parse(
        self,
        text: str,
        history: Sequence[str] = (),
        known_facts: Mapping[str, str | Sequence[str]] | None = None,
    ) -> TextParse:
        """Parse a customer's turn; counted and timed (the wall time includes waiting for the parse thread)."""
        parser = await self.parser()
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        parsed = await loop.run_in_executor(self._thread, parser.parse, text, tuple(history), known_facts)
        ms = (time.perf_counter() - t0) * 1e3
        self.latency.add(ms)
        self.counts["parses"] += 1
        if parsed.clarify is not None:
            self.counts["clarify"] += 1
            self.counts[f"clarify_{parsed.clarify.reason}"] += 1
        return TextParse(parsed, ms)

    def summary(self) -> dict[str, Any]:
        """``/v1/metrics``' ``parser`` block: parses, clarifications (by reason) and the parse latency."""
        n = self.counts["parses"]
        return {
            "loaded": self._parser is not None,
            "parses": n,
            "clarify": self.counts["clarify"],
            "clarify_missing_slots": self.counts["clarify_missing_slots"],
            "clarify_unsure": self.counts["clarify_unsure"],
            "clarify_rate": self.counts["clarify"] / n if n else None,
            "parse_ms": self.latency.summary(),
        }

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)


def _json_args(g: Goal) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple | list) else v for k, v in g.args.items()}


def parsed_out(p: TextParse) -> dict[str, Any]:
    """The response's ``parsed`` field (:class:`~agentic_ray.serving.schemas.ParsedOut`)."""
    r = p.parsed
    return {
        "families": list(r.families),
        "family": r.family,
        "goals": [
            {
                "id": g.id,
                "skill": g.skill,
                "args": _json_args(g),
                "deps": list(g.deps),
                "priority": g.priority,
                "hints": dict(g.hints),
                "safety_check": g.safety_check,
            }
            for g in r.goals
        ],
        "facts": dict(r.facts),
        "mentioned": [{"type": m.type, "id": m.id} for m in r.mentioned],
        "slots": [
            {
                "slot": s.slot,
                "value": s.value,
                "turn": s.turn,
                "start": s.start,
                "end": s.end,
                "subtask": s.subtask,
                "confidence": s.confidence,
            }
            for s in r.slots
        ],
        "confidence": r.confidence,
        "parse_ms": round(p.ms, 3),
    }


def clarify_response(p: TextParse, trace_id: str) -> dict[str, Any]:
    """A :class:`~agentic_ray.serving.schemas.ClarifyResponse` for a parse with a clarification."""
    c = p.parsed.clarify
    assert c is not None
    return {
        "kind": "clarify",
        "trace_id": trace_id,
        "clarify": {
            "reason": c.reason,
            "missing": list(c.missing),
            "identity_options": [list(o) for o in c.identity_options],
            "families": list(c.families),
        },
        "parsed": parsed_out(p),
    }


def goals_in(parsed: ParsedRequest) -> list[dict[str, Any]]:
    """The parsed goals as ``/v1/act`` goal bodies (:class:`~agentic_ray.serving.schemas.GoalIn`), so that they
    pass the same checks against the domain's contracts as a client's structured goal."""
    return [
        {
            "id": g.id,
            "skill": g.skill,
            "args": _json_args(g),
            "numeric": {k: float(v) for k, v in g.numeric.items()},
            "deps": list(g.deps),
            "priority": g.priority,
            "tolerance": g.tolerance,
            "description": g.description,
            "hints": dict(g.hints),
            "safety_check": g.safety_check,
        }
        for g in parsed.goals
    ]
