"""Issue 31's loop from production back to training, bounded (a few minutes on 2 CPUs): prints one JSON line.

1. **A served policy with an injected weakness**: the tiny config's policy imitating expert demonstrations of
   every family of the env but one (``--weak``, never shown), on four families.
2. **Production traffic**: agent-mode episodes of the Serve app (the real HTTP app and ``PolicyService``, its
   policy called in-process: no Ray), on training seeds, with feedback posted to ``/v1/feedback`` (success when
   the episode completed, else a failure, ``not_solved``).
3. **refine** reads the app's store, re-scores, attributes, builds the incremental dataset and, past the trigger,
   trains the served policy's last layers in reflection mode, gates the update on the fixed validation tasks
   (``--tasks-per-family`` of each family) and registers it as the app's canary candidate in its settings file.
4. **The canary**: the app restarted from that settings file serves the candidate under its canary router until
   it promotes it or rolls it back (``promoted``); a second app with a candidate made worse on purpose (a random
   policy: an untrained module, sampled) must roll it back (``rollback_ok``). Both stop by themselves (at most
   ``--canary-episodes`` episodes each).

Figures: ``failure_class_share_before`` / ``_after`` (the dominant cause's share of the validation episodes of
the served policy and of the update), ``validation_completion_before`` / ``_after`` with the after value's 95%
Wilson interval (goal: its low end above the before value minus 0.01), ``hard_negative_share`` and
``filtered_share`` (refine's dataset), ``promoted``, ``rollback_ok``, ``pairwise_vs_scalar_accuracy`` (the
Bradley–Terry scorer and the scalar regression fitted on the same noisy annotator labels, accuracy on clean held-out
pairs: :mod:`agentic_ray.refine.preference`; the annotators are simulated, the Serve feedback of this run gives
``preference_pairs_served`` pairs) and ``wall_s``.

    python benchmarks/refine.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("WANDB_MODE", "offline")

FAMILIES = ["address_error", "cancellation", "stock_inquiry", "late_delivery"]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n``."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def weak_policy(run: Path, weak: str, demos: int, epochs: int, seed: int) -> Path:
    """Imitation on expert demonstrations of every family but ``weak``; saved as the run's ``il`` checkpoint."""
    from agentic_ray.algorithms.build import module_spec
    from agentic_ray.eval.policy_loading import MODULE_SUBDIR
    from agentic_ray.settings import ExperimentSettings
    from agentic_ray.stages.demos import collect_demos
    from agentic_ray.stages.imitation import imitate_stage

    s = ExperimentSettings.model_validate(json.loads((run / "settings.json").read_text()))
    seen = s.env.model_copy(update={"families": [f for f in s.env.families or FAMILIES if f != weak]})
    import torch

    torch.manual_seed(seed)
    module = module_spec(s).build()
    rows = collect_demos(seen, demos, s.stages.il.wrong_sample_share, seed=seed)
    imitate_stage(module, list(rows), s.stages.il.model_copy(update={"epochs": epochs}), seed)
    dest = run / "checkpoints" / "il"
    module.save_to_path(str(dest / MODULE_SUBDIR))
    return dest


def traffic(client: Any, n: int, seed0: int) -> Counter[str]:
    """``n`` agent-mode episodes streamed from ``/v1/episodes``, each given feedback; returns the outcomes."""
    from tests.helpers.serving import AUTH, stream_episode

    out: Counter[str] = Counter()
    for i in range(n):
        body = {"domain": "ecommerce", "family": FAMILIES[i % len(FAMILIES)], "seed": seed0 + i}
        sid, steps = stream_episode(client, body)
        ok = bool(steps[-1]["done"] and steps[-1]["completed"])
        fb = {"trace_id": sid, "outcome": "success" if ok else "failure"}
        if not ok:
            fb["reason"] = "not_solved"
        client.post("/v1/feedback", json=fb, headers=AUTH).raise_for_status()
        out[fb["outcome"]] += 1
    return out


def canary(settings: dict[str, Any], max_episodes: int, seed0: int) -> dict[str, Any]:
    """Serve ``settings`` (with a candidate) until its canary promotes or rolls back, or ``max_episodes``."""
    from tests.helpers.serving import AUTH, make_service

    svc, c = make_service(settings)
    t0 = time.perf_counter()
    errors = n = 0
    state = "?"
    try:
        for i in range(max_episodes):
            body = {"domain": "ecommerce", "family": FAMILIES[i % len(FAMILIES)], "seed": seed0 + i}
            r = c.post("/v1/episodes", json=body, headers=AUTH)
            n += 1
            errors += r.status_code != 200 or "event: error" in r.text
            m = c.get("/v1/metrics", headers=AUTH).json()["canary"]
            state = m["state"]
            if state in ("promoted", "rolled_back"):
                break
    finally:
        svc.close()
    last = m["decisions"][-1] if m.get("decisions") else {}
    return {
        "state": state,
        "episodes": n,
        "errors": errors,
        "events": [d["event"] for d in m.get("decisions", [])],
        "last": {k: last.get(k) for k in ("event", "candidate", "stable", "z")},
        "s": round(time.perf_counter() - t0, 1),
    }


def preference(n_pairs: int, seed: int, seeds: int = 10) -> dict[str, Any]:
    """Bradley–Terry against a scalar regression, each fitted on ``n_pairs`` noisily annotated pairs
    (:func:`~agentic_ray.refine.preference.annotated_pairs`) and measured on 5,000 clean held-out pairs; the
    mean accuracy over ``seeds`` draws of the training pairs."""
    import numpy as np

    from agentic_ray.refine.preference import annotated_pairs, compare

    test = annotated_pairs(5000, 10_000 + seed)
    runs = [compare(annotated_pairs(n_pairs, seed + i), test) for i in range(seeds)]
    return {
        "pairwise": round(float(np.mean([r["pairwise"] for r in runs])), 4),
        "scalar": round(float(np.mean([r["scalar"] for r in runs])), 4),
        "train_pairs": n_pairs,
        "draws": seeds,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weak", default="address_error", help="The family the served policy never saw.")
    ap.add_argument("--demos", type=int, default=120, help="Imitation demonstrations of the served policy.")
    ap.add_argument("--il-epochs", type=int, default=8)
    ap.add_argument("--traffic", type=int, default=40, help="Served episodes with feedback.")
    ap.add_argument("--tasks-per-family", type=int, default=10, help="Validation tasks per family.")
    ap.add_argument("--canary-episodes", type=int, default=600, help="At most this many episodes per canary.")
    ap.add_argument(
        "--epochs", type=int, default=None, help="Epochs of the update (default: RefineConfig's)."
    )
    ap.add_argument(
        "--lr", type=float, default=None, help="Learning rate of the update (default: RefineConfig's)."
    )
    ap.add_argument(
        "--anchor-kl",
        type=float,
        default=None,
        help="Weight of the update's trust region (default: RefineConfig's; 0: none).",
    )
    ap.add_argument("--pref-pairs", type=int, default=100, help="Annotated pairs the preference scorers fit.")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()

    import yaml

    from agentic_ray.refine import RefineConfig, refine
    from agentic_ray.settings import load_settings
    from tests.helpers.serving import CANARY, CANARY_SLA, TINY, TOKEN, save_untrained_module

    os.environ.setdefault("AGENTIC_RAY_SERVE_TOKEN", TOKEN)
    with tempfile.TemporaryDirectory(prefix="refine-bench-") as tmp:
        work = Path(tmp)
        run = work / "run"
        run.mkdir()
        s = load_settings(TINY, {"env.families": FAMILIES, "seed": args.seed})
        (run / "settings.json").write_text(json.dumps(s.model_dump(mode="json")))
        ckpt = weak_policy(run, args.weak, args.demos, args.il_epochs, args.seed)
        t_il = time.perf_counter() - t0

        from tests.helpers.serving import make_service

        base = {
            "stable": {"checkpoint": str(ckpt), "version": "weak"},
            "feedback_db": str(work / "serve.sqlite"),
        }
        svc, c = make_service(base)
        try:
            outcomes = traffic(c, args.traffic, 50_000)
        finally:
            svc.close()
        # the app's settings file: refine registers its candidate there, and the canary app starts from it
        app_file = work / "serve.yaml"
        app_file.write_text(yaml.safe_dump({**base, "canary": CANARY, "sla": CANARY_SLA}))
        given = (("epochs", args.epochs), ("lr", args.lr), ("anchor_kl_coeff", args.anchor_kl))
        update = {k: v for k, v in given if v is not None}
        cfg = RefineConfig(
            tasks_per_family=args.tasks_per_family, fix_memory=None, serve_config=str(app_file), **update
        )
        t1 = time.perf_counter()
        rep = refine(work / "serve.sqlite", run, cfg)
        t_refine = time.perf_counter() - t1
        u = rep.update or {}
        n_val = args.tasks_per_family * len(FAMILIES)
        after = u.get("validation_completion_after")
        lo, hi = wilson(round(after * n_val), n_val) if after is not None else (None, None)
        promoted = rollback = None
        if u.get("promoted_to_candidate"):
            promoted = canary(yaml.safe_load(app_file.read_text()), args.canary_episodes, 60_000)
        bad = {
            **base,
            "canary": CANARY,
            "sla": CANARY_SLA,
            "feedback_db": str(work / "bad.sqlite"),
            "candidate": {
                "checkpoint": str(save_untrained_module(work / "random", seed=1)),
                "sample": True,
                "version": "random",
            },
        }
        rollback = canary(bad, args.canary_episodes, 70_000)
        ds = rep.dataset
        row = {
            "failure_class": rep.dominant_cause,
            "failure_class_share_before": u.get("cause_share_before"),
            "failure_class_share_after": u.get("cause_share_after"),
            "validation_completion_before": u.get("validation_completion_before"),
            "validation_completion_after": after,
            "validation_completion_after_ci95": [lo, hi],
            "validation_tasks": n_val,
            "gates_passed": u.get("passed"),
            "update": {
                "samples": u.get("samples"),
                "epochs": cfg.epochs,
                "lr": cfg.lr,
                "anchor_kl_coeff": cfg.anchor_kl_coeff,
                "anchor_states": (u.get("train") or {}).get("anchor_states"),
            },
            "hard_negative_share": ds.get("hard_negative_share"),
            "filtered_share": ds.get("filtered_share"),
            "promoted": promoted is not None and promoted["state"] == "promoted",
            "rollback_ok": rollback["state"] == "rolled_back" and rollback["errors"] == 0,
            "pairwise_vs_scalar_accuracy": preference(args.pref_pairs, args.seed),
            "preference_pairs_served": rep.preference_pairs,
            "traffic": {"episodes": args.traffic, **outcomes},
            "cause_shares_served": rep.attribution.get("cause_shares"),
            "canary_good": promoted,
            "canary_bad": rollback,
            "il_s": round(t_il, 1),
            "refine_s": round(t_refine, 1),
            "wall_s": round(time.perf_counter() - t0, 1),
        }
    publish("refine", [row], argv=argv)
    return row


if __name__ == "__main__":
    main()
