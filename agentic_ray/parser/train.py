"""Train a domain's goal parser from its own renderings (``agentic-ray parser train --domain NAME``).

The build renders the domain's training tasks with the training templates (:mod:`agentic_ray.parser.corpus`),
learns the goal templates (:mod:`agentic_ray.parser.dag_template`), embeds every conversation and sentence once,
and fits the family classifiers and the slot tagger. Nothing here names a domain: a domain takes part by shipping
``renderings`` (see :mod:`agentic_ray.domains.rendering`).
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentic_ray.domains.protocol import Domain
from agentic_ray.domains.rendering import Renderings
from agentic_ray.parser.corpus import Example, render_corpus
from agentic_ray.parser.dag_template import learn_templates
from agentic_ray.parser.family_classifier import FamilyClassifier, mask_slots
from agentic_ray.parser.goal_parser import GoalParser, embed
from agentic_ray.parser.slot_tagger import SlotTagger

__all__ = [
    "ParserTrainConfig",
    "domain_renderings",
    "entity_count",
    "example_spans",
    "train_and_save",
    "train_parser",
]


class ParserTrainConfig(BaseModel):
    """How a goal parser is built."""

    model_config = ConfigDict(extra="forbid")

    per_family: int = Field(default=80, ge=2, le=10_000, description="Rendered training tasks per family.")
    template_draws: int = Field(
        default=40, ge=2, le=10_000, description="Tasks drawn per family to learn the goal templates."
    )
    seed: int = Field(default=0, ge=0, description="Seed of the task draws and of the renderings.")
    typo_rate: float = Field(
        default=0.04, ge=0.0, le=0.5, description="Chance that a word around slots has a typo."
    )
    c_family: float = Field(default=10.0, gt=0, description="Inverse L2 strength of the family classifier.")
    c_tagger: float = Field(default=4.0, gt=0, description="Inverse L2 strength of the slot tagger.")
    label_threshold: float = Field(
        default=0.5, gt=0.0, lt=1.0, description="Message probability at which a family counts as raised."
    )
    threads: int = Field(default=1, ge=1, le=64, description="Torch threads of the embedder while training.")
    min_confidence: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Share of the family probability mass under which the parse asks instead of acting.",
    )


def domain_renderings(domain: Domain) -> Renderings:
    """The domain's renderings: its ``renderings`` attribute, else ``RENDERINGS`` of ``<its package>.renderings``.

    Raises:
        LookupError: the domain ships no renderings.
    """
    r = getattr(domain, "renderings", None)
    if isinstance(r, Renderings):
        return r
    module = type(domain).__module__
    try:
        mod = importlib.import_module(f"{module}.renderings")
    except ImportError:
        mod = None
    r = getattr(mod, "RENDERINGS", None)
    if not isinstance(r, Renderings):
        raise LookupError(
            f"domain {domain.name!r} ships no renderings: add {module}.renderings with RENDERINGS "
            "(see agentic_ray.domains.rendering)"
        )
    return r


def example_spans(ex: Example) -> list[list[tuple[int, int, str]]]:
    """Per turn, the slot spans ``[(start, end, slot)]`` of an example (facts included)."""
    out: list[list[tuple[int, int, str]]] = [[] for _ in ex.turns]
    for p in ex.pieces:
        if p.slot is not None:
            out[p.turn].append((p.start, p.end, p.slot))
    return out


def entity_count(ex: Example, rend: Renderings) -> int:
    """Most distinct values any entity slot takes in an example (at least 1)."""
    vals: dict[str, set[str]] = {}
    for p in ex.pieces:
        if p.slot in rend.entity_slots and p.value is not None:
            vals.setdefault(p.slot, set()).add(p.value)
    return max([1, *(len(v) for v in vals.values())])


def masked_turns(ex: Example, fact_keys: list[str], rend: Renderings) -> list[str]:
    """The turns of an example as the classifiers read them."""
    return [
        mask_slots(text, sp, fact_keys, list(rend.entity_slots))
        for text, sp in zip(ex.turns, example_spans(ex), strict=True)
    ]


def train_parser(domain: Domain, config: ParserTrainConfig | None = None) -> GoalParser:
    """Build the goal parser of ``domain`` from its renderings (training split only)."""
    cfg = config or ParserTrainConfig()
    t0 = time.perf_counter()
    rend = domain_renderings(domain)
    templates = learn_templates(domain, rend, cfg.template_draws, cfg.seed)
    corpus = render_corpus(domain, rend, cfg.per_family, "train", cfg.seed, cfg.typo_rate)
    simple = list(templates.families)
    fact_keys = sorted({k for f in templates.families.values() for fs in f.fact_sets for k in fs})
    x = embed(["\n".join(masked_turns(ex, fact_keys, rend)) for ex in corpus], cfg.threads)
    clf = FamilyClassifier.fit(simple, x, [ex.families for ex in corpus], cfg.c_family, cfg.seed)
    split_rule = sum(entity_count(ex, rend) == len(ex.families) for ex in corpus) / len(corpus)
    texts, spans = [], []
    for ex in corpus:
        for text, sp in zip(ex.turns, example_spans(ex), strict=True):
            texts.append(text)
            spans.append(sp)
    lexicon = {
        k: sorted({p for v, ps in vals.items() for p in (v, *ps)}) for k, vals in rend.value_phrases.items()
    }
    tagger = SlotTagger.fit(texts, spans, lexicon, cfg.c_tagger, cfg.seed)
    info: dict[str, Any] = {
        "config": cfg.model_dump(),
        "examples": len(corpus),
        "split_rule_holds": split_rule,
        "train_s": round(time.perf_counter() - t0, 1),
    }
    return GoalParser(
        domain.name,
        templates,
        clf,
        tagger,
        dict(rend.entity_slots),
        {k: {v: list(ps) for v, ps in vals.items()} for k, vals in rend.value_phrases.items()},
        fact_keys,
        cfg.min_confidence,
        info,
        cfg.label_threshold,
        split_by_entities=split_rule == 1.0,
    )


def train_and_save(domain: Domain, out: Path, config: ParserTrainConfig | None = None) -> GoalParser:
    """:func:`train_parser`, then write the parser to ``out``."""
    p = train_parser(domain, config)
    p.save(out)
    return p
