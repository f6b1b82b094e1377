"""Preference learning: the Bradley–Terry scorer on noisy annotator pairs against a scalar regression of the same
labels, and the pairs the Serve store's feedback gives."""

from __future__ import annotations

import numpy as np

from agentic_ray.refine.preference import (
    annotated_pairs,
    compare,
    feedback_pairs,
    fit_bradley_terry,
    pair_accuracy,
)
from agentic_ray.refine.served_episodes import read_served_episodes
from tests.helpers import refine_store as R
from tests.helpers.serving import validation_env
from tests.unit.refine.conftest import WEAK_FAMILY, weak_policy


def test_the_pairwise_scorer_orders_clean_pairs_from_noisy_annotators() -> None:
    test = annotated_pairs(2000, 99)
    r = compare(annotated_pairs(300, 1), test)
    # the annotators' offsets cancel in a pair: the pairwise scorer orders held-out pairs by the true utility
    assert r["pairwise"] > 0.93 and r["pairwise"] >= r["scalar"], r
    # trained on the opposite order it orders them the other way (the labels do reach the fit)
    train = annotated_pairs(300, 1)
    better, worse = train.preferred()
    assert pair_accuracy(fit_bradley_terry(worse, better), test.a, test.b, test.truth) < 0.1


def test_feedback_on_two_episodes_of_one_task_is_a_pair(tmp_path) -> None:
    runs = {"n": 0}

    def first_expert_then_weak(env, t):
        runs["n"] += t == 0
        return R.expert(env, t) if runs["n"] == 1 else weak_policy(env, t)

    task = (WEAK_FAMILY, 1000000000)
    recorded = R.record_sessions(
        tmp_path / "serve.sqlite", validation_env(), [task, task], first_expert_then_weak
    )
    assert [r.completed for _s, r in recorded] == [True, False]
    eps = read_served_episodes(tmp_path, validation_env())
    pairs = feedback_pairs(eps)
    assert len(pairs) == 1
    better, worse = pairs[0]
    assert better.completed and not worse.completed
    assert np.array_equal([s.skill for s in better.steps], [s.skill for s in recorded[0][1].steps])


def test_a_pass_with_enough_feedback_pairs_refits_l5_and_the_layer_loads_it(tmp_path) -> None:
    import json

    from agentic_ray.refine import RefineConfig, refine
    from agentic_ray.rewards.layers import LongTermValueLayer
    from agentic_ray.rewards.ltv_model import CONTEXT_FEATURES, FEATURES, LTVModel
    from tests.unit.refine.conftest import make_run_dir

    tasks = [(WEAK_FAMILY, 1000000000 + i) for i in range(3)]
    seen: dict[tuple[str, int], int] = {}

    def expert_then_hands_off(env, t):
        if t == 0:
            key = (env.task.family, env.task.seed)
            seen[key] = seen.get(key, 0) + 1
        first = seen[(env.task.family, env.task.seed)] == 1
        return R.expert(env, t) if first else R.hands_off_early(WEAK_FAMILY)(env, t)

    recorded = R.record_sessions(
        tmp_path / "serve" / "serve.sqlite", validation_env(), tasks + tasks, expert_then_hands_off
    )
    assert [r.completed for _s, r in recorded] == [True] * 3 + [False] * 3
    run = make_run_dir(tmp_path / "run")
    cfg = RefineConfig(max_alternatives=1, fix_memory=None, preference_min_pairs=3)
    rep = refine(tmp_path / "serve", run, cfg, train=False)
    assert rep.preference_pairs == 3 and rep.preference_model == str(run / "refine" / "l5_preference.json")
    doc = json.loads((run / "refine" / "l5_preference.json").read_text())
    shipped = LTVModel.load()
    fitted = doc["train"]["fitted_features"]
    assert fitted and not set(fitted) & set(CONTEXT_FEATURES)  # a pair is one customer: no context weights
    keep = [i for i, f in enumerate(FEATURES) if f not in fitted]
    assert np.allclose(np.asarray(doc["coef"])[keep], shipped.coef[keep])
    layer = LongTermValueLayer(model_path=rep.preference_model)
    assert layer.scorer_version.startswith("1/ltv-bt-3pairs@")
    good, bad = [r for _s, r in recorded[:3]], [r for _s, r in recorded[3:]]
    # the refitted L5 scores each task's success above its failure
    assert all(g > b for g, b in zip(layer.model.uplift(good), layer.model.uplift(bad), strict=True))
    # below the bar nothing is fitted
    again = make_run_dir(tmp_path / "run2")
    rep2 = refine(tmp_path / "serve", again, cfg.model_copy(update={"preference_min_pairs": 4}), train=False)
    assert rep2.preference_model is None and not (again / "refine" / "l5_preference.json").exists()
