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
never saw (every third of each group), on tasks drawn from another seed.

With a policy (``--checkpoint``, or ``--train-il-demos N`` to train one first: the tiny config's pipeline with N
imitation demonstrations x 8 epochs, its imitation checkpoint, as the shared Serve test fixture does; needs a
config of this domain), also:
  completion_from_goal  the policy on the config's validation tasks (``--tasks-per-family`` per family), greedy,
                        without injected faults, given the structured goal (the env's own task)
  completion_from_text  the same policy on the same tasks given what the parser reads from a held-out rendering
                        of each task (:meth:`~agentic_ray.parser.ParsedRequest.given_task`, as agent mode serves
                        text); a task counts when the env completes the parsed task *and* every goal of the real
                        task was met by a successful call (a misread goal completed is not a completion); a
                        clarification, or a parse whose goals the task does not have, counts as not completed
                        (``text_clarified``, ``text_misread_family`` say how many)
  completion_gap        goal minus text, in points (goal: within 2)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

from agentic_ray.domains import get_domain
from agentic_ray.parser.corpus import Example, render_corpus, render_task
from agentic_ray.parser.evaluation import evaluate
from agentic_ray.parser.goal_parser import GoalParser, load_parser
from agentic_ray.parser.train import domain_renderings

REPO = Path(__file__).resolve().parents[1]


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


def train_policy(config: str, il_demos: int, out: Path, overrides: dict[str, Any]) -> Path:
    """The imitation checkpoint of a pipeline run of ``config`` with ``il_demos`` demonstrations x 8 epochs (the
    shared Serve fixture's recipe, :func:`tests.helpers.serving.build_served`); starts a local Ray."""
    from agentic_ray.cli.common import init_ray
    from agentic_ray.eval.policy_loading import pick_checkpoint
    from agentic_ray.settings import load_settings
    from agentic_ray.stages.pipeline import run_pipeline

    init_ray(None, 2)
    il = {"stages.il.demos": il_demos, "stages.il.epochs": 8, "wandb.mode": "disabled"}
    run_pipeline(load_settings(config, {**overrides, **il}), run_dir=out, progress=lambda _m: None)
    return pick_checkpoint(out, "il")


def _episode(env: Any, policy: Any, family: str, seed: int, given: Any = None) -> bool:
    """One greedy episode on ``(family, seed)`` (the evaluator's seeding), the task ``given`` if set; whether the
    env completed it and every goal of the real task was met by a successful, non-degraded call."""
    from agentic_ray.keys import EPISODE_RECORD
    from agentic_ray.rewards.episode_record import EpisodeRecord

    _w, real = env.domain.make_task(family, seed)
    if env.config.risk_mode == "soft":
        real = real.without_safety_checks()
    options = {"family": family, "task_seed": seed, "task_given": given}
    obs, _ = env.reset(seed=zlib.crc32(f"{family}:{seed}".encode()), options=options)
    while True:
        (action,), _dbg = policy.act_batch([obs], [env])
        obs, _r, term, trunc, info = env.step(action)
        if term or trunc:
            rec = EpisodeRecord.from_dict(info[EPISODE_RECORD])
            break
    calls = env.state.history
    sem = env.list_semantics
    met = all(any(g.matches(c.skill, c.params, sem.get(c.skill)) for c in calls) for g in real.goals)
    return bool(rec.completed) and met


def completion(
    domain_name: str,
    checkpoint: Path,
    config: str,
    tasks_per_family: int,
    seed: int,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``completion_from_goal`` and ``completion_from_text`` (see the module docstring)."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv
    from agentic_ray.eval.evaluator import ModulePolicy, validation_env_config, validation_tasks
    from agentic_ray.eval.policy_loading import load_policy_module
    from agentic_ray.settings import load_settings

    settings = load_settings(config, overrides)
    if settings.env.domain != domain_name:
        raise SystemExit(
            f"{config} trains domain {settings.env.domain!r}, not {domain_name!r}: pass --config "
            f"(or --set env.domain={domain_name})"
        )
    cfg = validation_env_config(settings.env, 0.0)  # no injected faults: they are drawn per goal list
    env = AgentTaskEnv(cfg)
    policy = ModulePolicy(load_policy_module(checkpoint))
    parser = load_parser(domain_name)
    rend = domain_renderings(env.domain)
    tasks = validation_tasks(cfg, tasks_per_family)
    goal_ok = text_ok = clarified = misread = 0
    t0 = time.perf_counter()
    for family, task_seed in tasks:
        goal_ok += _episode(env, policy, family, task_seed)
        _w, task = env.domain.make_task(family, task_seed)
        ex = render_task(task, rend, random.Random(f"{family}:{task_seed}:{seed}"), "heldout")
        parsed = parser.parse(*_last(ex))
        if parsed.clarify is not None:
            clarified += 1
            continue
        try:
            given = parsed.given_task(task)
        except ValueError:  # goals this world's task does not have: a misread family
            misread += 1
            continue
        text_ok += _episode(env, policy, family, task_seed, lambda _drawn, t=given: t)
    env.close()
    n = len(tasks)
    return {
        "completion_from_goal": round(goal_ok / n, 4),
        "completion_from_text": round(text_ok / n, 4),
        "completion_gap_points": round(100 * (goal_ok - text_ok) / n, 2),
        "completion_tasks": n,
        "text_clarified": clarified,
        "text_misread_family": misread,
        "completion_wall_s": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domain", action="append", required=True, help="Domain (repeat for several).")
    ap.add_argument("--per-family", type=int, default=40, help="Held-out tasks per family.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--note", default=None, help="Remark recorded with the figures (e.g. other jobs running)."
    )
    ap.add_argument("--checkpoint", default=None, help="Policy checkpoint for the completion pair.")
    ap.add_argument(
        "--train-il-demos",
        type=int,
        default=None,
        help="Train the policy of the completion pair first (imitation demonstrations; ~1-3 min for 120).",
    )
    ap.add_argument(
        "--config",
        default=str(REPO / "configs" / "tiny.yaml"),
        help="Config of the policy's env (its domain).",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Override of the policy's config, as `agentic-ray train --set` (e.g. env.domain=helpdesk).",
    )
    ap.add_argument(
        "--tasks-per-family", type=int, default=5, help="Validation tasks per family (completion)."
    )
    args = ap.parse_args()
    from agentic_ray.cli.common import parse_overrides

    overrides = parse_overrides(args.set)
    checkpoint = Path(args.checkpoint) if args.checkpoint else None
    if checkpoint is None and args.train_il_demos:
        checkpoint = train_policy(
            args.config, args.train_il_demos, Path(tempfile.mkdtemp(prefix="goal_parser_policy_")), overrides
        )
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
        }
        if checkpoint is not None:
            row.update(
                completion(d.name, checkpoint, args.config, args.tasks_per_family, args.seed, overrides)
            )
            row["policy"] = f"il_demos={args.train_il_demos}" if args.train_il_demos else str(checkpoint)
        row["load1"] = round(os.getloadavg()[0], 2)
        publish("goal_parser", [row], variant=d.name, note=args.note)


if __name__ == "__main__":
    main()
