"""The goal parser: a customer's words (and the conversation's history) to a goal DAG, facts and entities.

``parse(text, history, domain)`` embeds the conversation once (all-MiniLM-L6-v2, :func:`agentic_ray.text.
get_embedder`), picks the families with a multi-label classifier, tags slots token by token, gives each slot to
the request it was said for (for a composite request, by which sentence raises which family), and builds the DAG
from the families' templates (:mod:`agentic_ray.parser.dag_template`). A request that lacks a slot its family
needs, or the customer's identity, or whose family is uncertain, gets a :class:`~agentic_ray.parser.
parsed_request.Clarify` instead of goals. The parser of a domain is trained by :func:`agentic_ray.parser.train.
train_parser` (``agentic-ray parser train --domain NAME``) and shipped in the domain's data folder.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.domains.protocol import Domain, EntityRef
from agentic_ray.parser.dag_template import DagTemplates
from agentic_ray.parser.family_classifier import FamilyClassifier, mask_slots, segments
from agentic_ray.parser.parsed_request import Clarify, FactValue, ParsedRequest, SlotSpan
from agentic_ray.parser.slot_tagger import SlotTagger
from agentic_ray.text import get_embedder

__all__ = ["GoalParser", "load_parser", "parse"]

_META, _WEIGHTS = "goal_parser.json", "goal_parser.npz"
"""The parser's two files, written into a domain's ``data_dir`` (shipped as package data)."""
MIN_PHRASE_SIMILARITY = 0.75
"""Least ``difflib`` ratio between a tagged enum span and a phrase of the slot for the span to take its value
(a typo'd phrase passes; a bare "address" tagged as a delivery source, ratio 0.56, does not)."""


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the embedder on ``n`` torch threads, then restore the count.

    One thread is the default for a parse: on this 2-CPU machine under a load of 5, one short message embedded in
    52 ms (median, 76 ms max) on one thread and 488 ms (1.9 s max) on torch's default two, which spin against
    the other processes."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def embed(texts: Sequence[str], threads: int = 1) -> np.ndarray:
    """``(len(texts), 384)`` unit-norm embeddings from the shared embedder, on ``threads`` torch threads."""
    with torch_threads(threads):
        return get_embedder().encode(list(texts))


class GoalParser:
    """A trained parser of one domain (see the module docstring).

    Attributes:
        domain: the domain name.
        templates: the families' goal templates and composition rule.
        classifier: the family classifiers.
        tagger: the slot tagger.
        entity_slots: slot -> entity type.
        value_phrases: enum slot -> value -> phrases.
        fact_keys: slots that are facts (``Request.facts`` keys).
        min_confidence: share of the family probability mass under which the parse asks instead of acting.
        label_threshold: message probability at which a family counts as raised (multi-label).
        threads: torch threads of the embedder during a parse (see :func:`torch_threads`).
        split_by_entities: read several requests as one per distinct value of an entity slot (each classified
            alone) rather than from the multi-label probabilities of the whole text; the build sets it when the
            rule holds on every training rendering.
    """

    def __init__(
        self,
        domain: str,
        templates: DagTemplates,
        classifier: FamilyClassifier,
        tagger: SlotTagger,
        entity_slots: dict[str, str],
        value_phrases: dict[str, dict[str, list[str]]],
        fact_keys: list[str],
        min_confidence: float,
        info: dict[str, Any] | None = None,
        label_threshold: float = 0.5,
        threads: int = 1,
        split_by_entities: bool = False,
    ) -> None:
        self.domain = domain
        self.templates = templates
        self.classifier = classifier
        self.tagger = tagger
        self.entity_slots = entity_slots
        self.value_phrases = value_phrases
        self.fact_keys = fact_keys
        self.min_confidence = min_confidence
        self.label_threshold = label_threshold
        self.threads = threads
        self.split_by_entities = split_by_entities
        self.info = info or {}
        self._phrase_index = {
            slot: {p.lower(): v for v, ps in vals.items() for p in (*ps, v)}
            for slot, vals in value_phrases.items()
        }

    # ------------------------------------------------------------------------------------------ slots
    def _value(self, slot: str, surface: str) -> str | None:
        """Normalise a slot's surface text: an enum phrase to its value (the closest phrase if none is exact and
        one is similar enough, else None: the span is dropped)."""
        index = self._phrase_index.get(slot)
        if index is None:
            return surface
        key = surface.lower().strip()
        if key in index:
            return index[key]
        score, best = max((difflib.SequenceMatcher(None, key, p).ratio(), p) for p in index)
        return index[best] if score >= MIN_PHRASE_SIMILARITY else None

    def _spans(self, turns: Sequence[str]) -> list[SlotSpan]:
        out = []
        for t, text in enumerate(turns):
            for s in self.tagger.tag(text):
                value = self._value(s.slot, s.text)
                if value is not None:
                    out.append(SlotSpan(s.slot, value, t, s.start, s.end, None, s.confidence))
        return out

    def _masked(self, turns: Sequence[str], spans: Sequence[SlotSpan], cut: tuple[int, int, int, int]) -> str:
        """The conversation from ``(turn, pos)`` to ``(turn, pos)`` with its slots masked, turns joined by lines."""
        t0, p0, t1, p1 = cut
        out = []
        for t, text in enumerate(turns):
            if t < t0 or t > t1:
                continue
            lo = p0 if t == t0 else 0
            hi = p1 if t == t1 else len(text)
            sp = [
                (s.start - lo, s.end - lo, s.slot)
                for s in spans
                if s.turn == t and lo <= s.start and s.end <= hi
            ]
            out.append(mask_slots(text[lo:hi], sp, self.fact_keys, list(self.entity_slots)))
        return "\n".join(x for x in out if x.strip())

    def _cuts(self, turns: Sequence[str], spans: Sequence[SlotSpan]) -> list[tuple[int, int, int, int]]:
        """The conversation split into requests: one per distinct value of the entity slot named most often
        (at most ``max_families``), each starting at the sentence of its value's first mention; one request when
        no entity slot has two values, or when the parser was trained to read families from the whole text."""
        whole = (0, 0, len(turns) - 1, len(turns[-1]))
        if not self.split_by_entities or self.classifier.max_families < 2:
            return [whole]
        best: list[SlotSpan] = []
        for slot in self.entity_slots:
            firsts: dict[str, SlotSpan] = {}
            for sp in sorted((x for x in spans if x.slot == slot), key=lambda x: (x.turn, x.start)):
                firsts.setdefault(sp.value, sp)
            if len(firsts) > len(best):
                best = list(firsts.values())
        best = best[: self.classifier.max_families]
        if len(best) < 2:
            return [whole]
        starts = [(0, 0)]
        for sp in best[1:]:
            seg_start = max((s for s, _ in segments(turns[sp.turn]) if s <= sp.start), default=0)
            starts.append((sp.turn, seg_start))
        if any(a >= b for a, b in itertools.pairwise(starts)):
            return [whole]  # two values in one sentence: no sentence boundary to cut at
        ends = [*starts[1:], (len(turns) - 1, len(turns[-1]))]
        return [(t0, p0, t1, p1) for (t0, p0), (t1, p1) in zip(starts, ends, strict=True)]

    # ------------------------------------------------------------------------------------------ parse
    def parse(
        self,
        text: str,
        history: Sequence[str] = (),
        known_facts: Mapping[str, str | Sequence[str]] | None = None,
    ) -> ParsedRequest:
        """Parse the customer's latest ``text`` in the context of their earlier turns ``history``.

        Args:
            text: the customer's latest turn.
            history: their earlier turns, oldest first.
            known_facts: facts the caller already holds (a logged-in customer's email): they count as said, and
                win over a value read from the text.
        """
        turns = [*history, text]
        spans = self._spans(turns)
        cuts = self._cuts(turns, spans)
        clf = self.classifier
        probs = clf.probs(embed([self._masked(turns, spans, c) for c in cuts], self.threads))
        if len(cuts) > 1:
            picks = [int(np.argmax(p)) for p in probs]
            if len(set(picks)) < len(
                picks
            ):  # one family twice: read it as one request about several entities
                cuts = [(0, 0, len(turns) - 1, len(turns[-1]))]
                probs = clf.probs(embed([self._masked(turns, spans, cuts[0])], self.threads))
        if len(cuts) == 1:
            picks = (
                clf.choose(probs[0], self.label_threshold)
                if not self.split_by_entities
                else [int(np.argmax(probs[0]))]
            )
            chosen = [clf.families[i] for i in picks]
            confidence = float(sum(probs[0][i] for i in picks) / max(float(probs[0].sum()), 1e-9))
        else:
            chosen = [clf.families[i] for i in picks]
            confidence = float(
                min(p[i] / max(float(p.sum()), 1e-9) for p, i in zip(probs, picks, strict=True))
            )
        spans = [self._assign(sp, cuts, chosen) for sp in spans]
        facts: dict[str, FactValue] = {
            k: v if isinstance(v, str) else tuple(v) for k, v in (known_facts or {}).items()
        }
        for sp in spans:
            if sp.slot in self.fact_keys:
                facts.setdefault(sp.slot, sp.value)
        mentioned = tuple(
            dict.fromkeys(
                EntityRef(self.entity_slots[s.slot], s.value) for s in spans if s.slot in self.entity_slots
            )
        )
        per_task: list[dict[str, str]] = [{} for _ in chosen]
        for sp in sorted(
            spans, key=lambda x: -x.confidence
        ):  # a slot said twice for one request: the surer one
            if sp.subtask is not None:
                per_task[sp.subtask].setdefault(sp.slot, sp.value)
        clarify = self._clarify(chosen, per_task, facts, confidence)
        goals = () if clarify is not None else self.templates.build(chosen, per_task)
        return ParsedRequest(
            domain=self.domain,
            families=tuple(chosen),
            family=self.templates.family_label(chosen),
            goals=goals,
            facts=facts,
            mentioned=mentioned,
            slots=tuple(spans),
            confidence=confidence,
            clarify=clarify,
            text="\n".join(turns),
        )

    def _assign(self, sp: SlotSpan, cuts: list[tuple[int, int, int, int]], chosen: list[str]) -> SlotSpan:
        """The span with its subtask: the request whose stretch holds it, if that family's template has it."""
        if len(cuts) == 1:
            k = 0
        else:
            k = max(i for i, (t0, p0, _, _) in enumerate(cuts) if (t0, p0) <= (sp.turn, sp.start))
        sub = k if sp.slot in self.templates.families[chosen[k]].slots else None
        return SlotSpan(sp.slot, sp.value, sp.turn, sp.start, sp.end, sub, sp.confidence)

    def _clarify(
        self,
        chosen: list[str],
        per_task: list[dict[str, str]],
        facts: Mapping[str, FactValue],
        confidence: float,
    ) -> Clarify | None:
        """What to ask, or None: the slots the families' templates need that were not given, the identity when
        no fact set that identifies the customer is complete, and ``unsure`` when the family is uncertain (the
        missing slots of the likeliest reading are named then too)."""
        unsure = confidence < self.min_confidence
        missing = tuple(
            dict.fromkeys(
                slot
                for f, got in zip(chosen, per_task, strict=True)
                for slot in self.templates.families[f].required_slots
                if slot not in got
            )
        )
        options = tuple(dict.fromkeys(fs for f in chosen for fs in self.templates.families[f].fact_sets))
        identified = not options or any(all(k in facts for k in fs) for fs in options)
        if unsure or missing or not identified:
            id_missing = (
                ()
                if identified
                else tuple(
                    dict.fromkeys(
                        k
                        for k in min(options, key=lambda fs: sum(k not in facts for k in fs))
                        if k not in facts
                    )
                )
            )
            return Clarify(
                "unsure" if unsure else "missing_slots",
                missing=missing + id_missing,
                identity_options=() if identified else options,
                families=tuple(chosen),
            )
        return None

    # ------------------------------------------------------------------------------------------ files
    def save(self, folder: Path) -> None:
        """Write ``goal_parser.json`` and ``goal_parser.npz`` into ``folder`` (created)."""
        folder.mkdir(parents=True, exist_ok=True)
        c, t = self.classifier, self.tagger
        meta = {
            "domain": self.domain,
            "templates": self.templates.to_json(),
            "families": c.families,
            "max_families": c.max_families,
            "tag_labels": t.labels,
            "tag_lexicon": t.lexicon,
            "vocab": sorted(t.vocab, key=t.vocab.__getitem__),
            "entity_slots": self.entity_slots,
            "value_phrases": self.value_phrases,
            "fact_keys": self.fact_keys,
            "min_confidence": self.min_confidence,
            "label_threshold": self.label_threshold,
            "split_by_entities": self.split_by_entities,
            "info": self.info,
        }
        (folder / _META).write_text(json.dumps(meta, sort_keys=True, separators=(",", ":")))
        np.savez_compressed(
            folder / _WEIGHTS,
            family_coef=c.coef.astype(np.float16),
            family_intercept=c.intercept,
            tag_coef=t.coef.astype(np.float16),
            tag_intercept=t.intercept,
        )

    @classmethod
    def load(cls, folder: Path) -> GoalParser:
        """Read a parser written by :meth:`save`."""
        meta = json.loads((folder / _META).read_text())
        w = np.load(folder / _WEIGHTS)
        clf = FamilyClassifier(
            meta["families"], w["family_coef"].astype(np.float32), w["family_intercept"], meta["max_families"]
        )
        tagger = SlotTagger(
            {f: i for i, f in enumerate(meta["vocab"])},
            meta["tag_labels"],
            w["tag_coef"].astype(np.float32),
            w["tag_intercept"],
            meta["tag_lexicon"],
        )
        return cls(
            meta["domain"],
            DagTemplates.from_json(meta["templates"]),
            clf,
            tagger,
            meta["entity_slots"],
            meta["value_phrases"],
            meta["fact_keys"],
            meta["min_confidence"],
            meta.get("info"),
            meta["label_threshold"],
            split_by_entities=meta["split_by_entities"],
        )


@functools.cache
def load_parser(domain_name: str, folder: str | None = None) -> GoalParser:
    """The parser of a domain (shipped in its ``data_dir``, or in ``folder``), loaded once per process.

    Raises:
        FileNotFoundError: the domain has no trained parser (train one: ``agentic-ray parser train --domain``).
    """
    from agentic_ray.domains import get_domain

    path = Path(folder) if folder else Path(get_domain(domain_name).data_dir)
    if not (path / _META).exists():
        raise FileNotFoundError(
            f"no goal parser for domain {domain_name!r} at {path}; train one with "
            f"`agentic-ray parser train --domain {domain_name}`"
        )
    return GoalParser.load(path)


def parse(text: str, history: Sequence[str], domain: Domain | str) -> ParsedRequest:
    """Parse a customer's ``text`` (with the conversation's earlier customer turns ``history``) for ``domain``
    with its shipped parser. See :class:`GoalParser`."""
    name = domain if isinstance(domain, str) else domain.name
    return load_parser(name).parse(text, history)
