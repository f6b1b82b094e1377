"""``SPREAD`` reward-actor groups are dealt round-robin over the alive nodes, not left to Ray's best effort, and an
actor that lands off its node at start-up is restarted there."""

from __future__ import annotations

from types import SimpleNamespace

from agentic_ray.rewards.reward_actor_pool import (
    SPREAD_PLACEMENT_ATTEMPTS,
    _repair_spread,
    misplaced,
    spread_strategies,
)


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


def test_misplaced_names_actors_off_their_alive_target():
    targets = [_id("a"), _id("b"), None, _id("c")]
    placed = [_id("a"), _id("a"), _id("a"), _id("a")]
    # b is alive and missed: repair; None is Ray's own SPREAD: not checked; c is dead: nothing to repair to.
    assert misplaced(targets, placed, {_id("a"), _id("b")}) == [1]
    assert misplaced(targets[:2], [_id("a"), _id("b")], {_id("a"), _id("b")}) == []
    assert misplaced(targets[:2], [_id("a"), None], {_id("a"), _id("b")}) == []  # not started yet: left alone


class _Ref:
    """Like an ObjectRef: each call gives a distinct reference, equal only to itself."""

    def __init__(self, value: str) -> None:
        self.value = value


class _Handle:
    def __init__(self, node: str) -> None:
        self.node = node
        self.node_id = SimpleNamespace(remote=lambda: _Ref(node))


def _fake_ray(monkeypatch, alive: list[str]) -> list[_Handle]:
    import ray

    killed: list[_Handle] = []
    monkeypatch.setattr(ray, "get", lambda ref, timeout=None: ref.value)
    monkeypatch.setattr(ray, "wait", lambda refs, num_returns=1, timeout=None: (list(refs), []))
    monkeypatch.setattr(ray, "nodes", lambda: [{"NodeID": n, "Alive": True} for n in alive])
    monkeypatch.setattr(ray, "kill", lambda h, no_restart=False: killed.append(h))
    monkeypatch.setattr("time.sleep", lambda s: None)
    return killed


def test_an_actor_that_missed_its_node_is_restarted_there_under_a_new_name(monkeypatch):
    killed = _fake_ray(monkeypatch, [_id("a"), _id("b")])
    strategies = spread_strategies(2, 0.0, [_node("a"), _node("b")], first=_id("a"))
    landings = iter([_id("b")])  # the restart of actor 1 lands where it should

    def start(name, strategy):
        return _Handle(next(landings))

    first = [_Handle(_id("a")), _Handle(_id("a"))]  # both on the head, as in the CI run
    names, handles = _repair_spread(["p-io-0", "p-io-1"], first, strategies, [_id("a"), _id("b")], start)
    assert [h.node for h in handles] == [_id("a"), _id("b")]
    assert names == ["p-io-0", "p-io-1-r1"]
    assert killed == [first[1]]


def test_after_the_last_try_the_actor_stays_and_a_warning_says_so(monkeypatch, caplog):
    killed = _fake_ray(monkeypatch, [_id("a"), _id("b")])
    strategies = spread_strategies(2, 0.0, [_node("a"), _node("b")], first=_id("a"))
    names, handles = _repair_spread(
        ["p-io-0", "p-io-1"],
        [_Handle(_id("a")), _Handle(_id("a"))],
        strategies,
        [_id("a"), _id("b")],
        lambda name, strategy: _Handle(_id("a")),  # the view never catches up
    )
    assert len(killed) == SPREAD_PLACEMENT_ATTEMPTS - 1
    assert names[1] == f"p-io-1-r{SPREAD_PLACEMENT_ATTEMPTS - 1}" and handles[1].node == _id("a")
    assert "not on their SPREAD target nodes" in caplog.text


def test_an_actor_still_waiting_for_resources_is_not_restarted(monkeypatch):
    import ray

    killed = _fake_ray(monkeypatch, [_id("a"), _id("b")])
    monkeypatch.setattr(
        ray, "wait", lambda refs, num_returns=1, timeout=None: (list(refs)[:1], list(refs)[1:])
    )
    strategies = spread_strategies(2, 1.0, [_node("a"), _node("b")], first=_id("a"))
    first = [_Handle(_id("a")), _Handle(_id("a"))]  # the second one's placement is not known yet
    names, handles = _repair_spread(
        ["p-cpu-0", "p-cpu-1"], first, strategies, [_id("a"), _id("b")], lambda n, s: _Handle(_id("b"))
    )
    assert killed == [] and names == ["p-cpu-0", "p-cpu-1"] and handles == first
