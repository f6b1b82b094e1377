"""``SPREAD`` reward-actor groups are dealt round-robin over the alive nodes, not left to Ray's best effort."""

from __future__ import annotations

from agentic_ray.rewards.reward_actor_pool import spread_strategies


def _id(c: str) -> str:
    return c * 56  # node ids are 28-byte hex strings


def _node(c: str, cpus: float = 1.0, alive: bool = True) -> dict:
    return {"NodeID": _id(c), "Alive": alive, "Resources": {"CPU": cpus}}


def test_two_actors_go_to_two_nodes_driver_first():
    s = spread_strategies(2, 0.0, [_node("b"), _node("a")], first=_id("b"))
    assert [x.node_id for x in s] == [_id("b"), _id("a")]
    assert all(x.soft for x in s)  # a dead node's actor may restart elsewhere


def test_dead_and_too_small_nodes_are_skipped_and_actors_wrap_around():
    nodes = [_node("a"), _node("b", alive=False), _node("c", cpus=0.5), _node("d", cpus=4)]
    s = spread_strategies(3, 1.0, nodes, first=_id("e"))
    assert [x.node_id for x in s] == [_id("a"), _id("d"), _id("a")]


def test_no_qualifying_node_falls_back_to_rays_spread():
    assert spread_strategies(2, 8.0, [_node("a")], first=_id("a")) == ["SPREAD", "SPREAD"]
