"""Two `ray start` nodes on this machine: EnvRunners and reward actors on both, then the worker node is killed.

The head (1 CPU) and the worker node (1 CPU) each get one EnvRunner (1 CPU each) and one actor of each reward
group (SPREAD); the ledger stays with the driver on the head. After 3 iterations the worker node is SIGKILLed in
the middle of an iteration. Training must go on on the head (its EnvRunner; the reward actors Ray restarts there),
and the audit must show nothing lost, double-counted or imputed, with what the dead runner held dropped with a
reason.
"""

from __future__ import annotations

import pytest

from tests.helpers.two_node_cluster import run_two_node_driver

pytestmark = pytest.mark.integration


def test_losing_the_worker_node_mid_run_loses_no_reward():
    r = run_two_node_driver(head_cpus=1, worker_cpus=1, kill_worker=True, iterations=7, kill_after=3)
    assert r.get("ok"), r.get("error", "") + r["driver_log_tail"]
    place = r["placement"]
    assert len(set(r["nodes"])) == 2
    assert set(place["env_runners"]) == set(r["nodes"])  # one EnvRunner per node
    assert set(place["reward_actors"]) == set(r["nodes"])  # reward actors on both nodes
    assert place["ledger"] == place["driver"]  # the ledger stays with the driver
    assert r["kill_t"] is not None and len(r["alive_nodes_at_end"]) == 1
    its = r["iterations"]
    # Training went on, on the head: every iteration ran, and the last ones sampled and trained.
    assert len(its) == 7 and sum(x["env_steps"] for x in its[4:]) > 0, its
    a = r["audit"]
    assert a["ok"], a
    assert (a["lost"], a["double_counted"], a["imputed"], a["value_mismatches"], a["pending"]) == (
        0,
        0,
        0,
        0,
        0,
    )
    assert set(a["drop_reasons"]) <= {"env_runner_died"}, a["drop_reasons"]
    assert a["trained"] > 0
