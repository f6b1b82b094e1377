"""Goal-parser benchmark (issue 28): the shipped parser of a domain on its held-out renderings.

Prints one JSON line per ``--domain``:
  family_acc      parsed families (in order) equal the task's
  slot_f1         micro F1 of (slot, value) pairs: facts, entity ids, enum values
  dag_exact       parsed goal DAG equals the gold DAG as text can state it (open arguments left out on both sides)
  clarify_rate    share of these complete requests answered with a clarification
  clarify_recall  share of requests with a needed entity slot (or, without one, the identity) cut out that are
                  clarified naming it (the identity: among the fact sets offered)
  p50_ms / p99_ms one parse (embedding included), warm, one torch thread
Held-out renderings use only the templates, identity sentences, greetings, joiners and follow-ups that training
never saw (every third of each group), on tasks drawn from another seed. ``completion_from_text`` against
``completion_from_goal`` needs the Serve path that takes text (phase 2) and is not measured here.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

from agentic_ray.domains import get_domain
from agentic_ray.parser.corpus import Example, render_corpus
from agentic_ray.parser.evaluation import evaluate
from agentic_ray.parser.goal_parser import GoalParser, load_parser
from agentic_ray.parser.train import domain_renderings


def without(ex: Example, slots: set[str]) -> Example:
    """The example with the text of these slots cut out (a request that lacks them)."""
    turns = list(ex.turns)
    for p in sorted((p for p in ex.pieces if p.slot in slots), key=lambda p: -p.start):
        turns[p.turn] = turns[p.turn][: p.start] + turns[p.turn][p.end :]
    return dataclasses.replace(ex, turns=tuple(turns), pieces=())


def clarify_recall(parser: GoalParser, examples: list[Example]) -> tuple[float, int]:
    """Cut out one needed entity slot (or, for a family without one, the identity) and count the parses whose
    clarification names what was cut."""
    hits = n = 0
    for ex in examples:
        needed = [
            s
            for fam in ex.families
            for s in parser.templates.families[fam].required_slots
            if s in parser.entity_slots
        ]
        cut = {needed[0]} if needed else set(ex.task.request.facts)
        p = parser.parse(*_last(without(ex, cut)))
        n += 1
        if needed:
            hits += p.clarify is not None and bool(cut & set(p.clarify.missing))
        else:  # the identity: any fact set may be asked for, and the options name them all
            hits += p.clarify is not None and tuple(sorted(cut)) in p.clarify.identity_options
    return hits / max(n, 1), n


def _last(ex: Example) -> tuple[str, tuple[str, ...]]:
    return ex.turns[-1], ex.turns[:-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domain", action="append", required=True, help="Domain (repeat for several).")
    ap.add_argument("--per-family", type=int, default=40, help="Held-out tasks per family.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--note", default=None, help="Remark recorded with the figures (e.g. other jobs running)."
    )
    args = ap.parse_args()
    for name in args.domain:
        d = get_domain(name)
        rend = domain_renderings(d)
        parser = load_parser(d.name)
        examples = render_corpus(d, rend, args.per_family, "heldout", args.seed)
        parser.parse(*_last(examples[0]))  # load the embedder before timing
        t0 = time.perf_counter()
        r = evaluate(parser, examples, rend)
        recall, n_cut = clarify_recall(parser, examples[:: max(1, len(examples) // 100)])
        row = {
            "domain": d.name,
            "n": r.n,
            "family_acc": round(r.family_acc, 4),
            "slot_f1": round(r.slot_f1, 4),
            "dag_exact": round(r.dag_exact, 4),
            "clarify_rate": round(r.clarify_rate, 4),
            "clarify_recall": round(recall, 4),
            "clarify_recall_n": n_cut,
            "p50_ms": round(r.p50_ms, 1),
            "p99_ms": round(r.p99_ms, 1),
            "wall_s": round(time.perf_counter() - t0, 1),
            "load1": round(os.getloadavg()[0], 2),
        }
        publish("goal_parser", [row], variant=d.name, note=args.note)


if __name__ == "__main__":
    main()
