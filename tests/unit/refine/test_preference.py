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
