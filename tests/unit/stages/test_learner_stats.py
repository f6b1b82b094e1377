"""The pipeline's per-iteration learner statistics: none for an iteration that made no learner update.

With asynchronous rewards a training iteration whose episodes are all still waiting for their scores makes no
update (``AAAC.training_step`` returns early), and the first iteration of a stage always is one: the previous
stage's checkpoint settled and trained on everything the EnvRunners held. RLlib's results still carry every
learner key it has seen, each reduced over an empty window to NaN: the reflection stage's first iteration logged
``policy_loss nan`` and ``entropy nan`` (and ``beta``, ``lambda_mean``, the gates: all NaN) on the inspection
config. A real AAAC learner and RLlib's own metrics logger, aggregated and compiled as ``Algorithm.train`` does.
"""

from __future__ import annotations

import copy
import math

from ray.rllib.utils.metrics import LEARNER_RESULTS
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from agentic_ray import keys
from agentic_ray.stages.pipeline import _learner_stats
from tests.unit.algorithms.test_aaac_learner import make_episode, make_learner


def test_an_iteration_without_a_learner_update_reports_no_learner_statistics() -> None:
    learner = make_learner(minibatch_size=4, num_epochs=1)
    episodes = [make_episode([1.0, 0.0, 1.0], terminated=True, seed=s) for s in range(2)]
    algo_metrics = MetricsLogger(root=True)

    # Iteration 1 trains (AAAC.training_step aggregates the learner's results, Algorithm.train compiles).
    results = learner.update(episodes=copy.deepcopy(episodes), timesteps={}, num_epochs=1, minibatch_size=4)
    algo_metrics.aggregate([results], key=LEARNER_RESULTS)
    trained = _learner_stats(algo_metrics.compile())
    assert {keys.AAAC_POLICY_LOSS, keys.AAAC_ENTROPY, keys.AAAC_BETA} <= trained.keys()
    assert all(math.isfinite(v) for v in trained.values())

    # Iteration 2: every episode held back, no update, nothing aggregated (the stale keys reduce to NaN).
    held_back = algo_metrics.compile()
    assert math.isnan(held_back[LEARNER_RESULTS]["default_policy"][keys.AAAC_POLICY_LOSS])  # RLlib's side
    assert _learner_stats(held_back) == {}

    # Iteration 3 trains again and reports again.
    results = learner.update(episodes=copy.deepcopy(episodes), timesteps={}, num_epochs=1, minibatch_size=4)
    algo_metrics.aggregate([results], key=LEARNER_RESULTS)
    again = _learner_stats(algo_metrics.compile())
    assert again.keys() == trained.keys() and all(math.isfinite(v) for v in again.values())
