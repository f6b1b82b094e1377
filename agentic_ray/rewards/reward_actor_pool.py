"""The driver-side owner of the reward actors: it creates them, names them, and saves or restores the ledger.

:meth:`RewardActorPool.create` starts the local judge (if no URL is configured), the ledger actor and the scorer
actor groups with uuid-suffixed names (Tune trials must not collide), and hands out :attr:`RewardActorPool.spec`,
a small picklable dict that EnvRunners and learners use to look the actors up by name.

Placement: the ledger actor is pinned to the driver's node (its SQLite file and the run's checkpoints live there;
if that node goes, the run goes with it). Scorer actors need no CPU of their own (``num_cpus=0`` by default) and
follow their group's ``scheduling_strategy``: ``SPREAD`` deals them round-robin over the alive nodes that can
hold them (:func:`spread_strategies`), then checks where each landed and restarts the ones that missed their
node (:func:`misplaced`). Every actor has
``max_restarts`` (default unlimited) and ``max_task_retries=-1``: when an actor or its node dies, Ray restarts it
(elsewhere, if its node is gone) and re-runs the calls that were in flight.

The other pieces: messages (:mod:`.score_messages`), the plain scorer (:mod:`.layer_group_scorer`), the actors
(:mod:`.reward_actors`), the runner-side client (:mod:`.reward_pool_client`) and its Ray-free state machine
(:mod:`.reward_client_state`).
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from pathlib import Path
from typing import Any

from agentic_ray.rewards.layers import LAYER_CLASSES, CostClass
from agentic_ray.rewards.ledger_audit import LedgerAudit
from agentic_ray.rewards.reward_actors import AsyncScorerActor, CpuScorerActor, LedgerActor
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig

LEDGER_FILE = "reward_ledger.sqlite"


def spread_strategies(n: int, num_cpus: float, nodes: list[dict[str, Any]], first: str) -> list[Any]:
    """Scheduling strategies that put ``n`` actors round-robin on the alive nodes with ``num_cpus`` CPUs.

    Ray's own ``"SPREAD"`` is best effort, and it was not enough: in a CI run (2026-12-01) both actors of a
    two-actor SPREAD group landed on the head of a two-node cluster. The affinity is ``soft``, so that if its
    node dies Ray restarts the actor on another one; a soft affinity can still land elsewhere at start-up (see
    :func:`misplaced`), which :meth:`RewardActorPool.create` checks and repairs.

    Args:
        n: number of actors.
        num_cpus: CPUs each actor reserves; nodes with fewer CPUs in all are skipped.
        nodes: ``ray.nodes()``.
        first: node id that gets the first actor (the driver's), if it qualifies.
    """
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ids = sorted(
        x["NodeID"]
        for x in nodes
        if x.get("Alive") and float(x.get("Resources", {}).get("CPU", 0.0)) >= num_cpus
    )
    if not ids:
        return ["SPREAD"] * n
    if first in ids:
        ids.remove(first)
        ids.insert(0, first)
    return [NodeAffinitySchedulingStrategy(node_id=ids[i % len(ids)], soft=True) for i in range(n)]


SPREAD_PLACEMENT_ATTEMPTS = 4
PLACEMENT_WAIT_S = 60.0


def misplaced(targets: list[str | None], placed: list[str | None], alive: set[str]) -> list[int]:
    """Indices of the actors that are not on their target node while that node is alive.

    Why a check is needed: in a CI run (2026-12-02) both actors of a two-actor group landed on the head of a
    two-node cluster even with the soft affinity. Our reading of Ray 2.60's source (``SelectForwardingNode`` in
    the GCS actor scheduler, ``NodeAffinitySchedulingPolicy`` in the raylet): an actor that needs no resources
    is forwarded to a random alive raylet, which applies the affinity with its own view of the cluster; if that
    view does not hold the target node yet (views are synced a little after a node joins), a soft affinity falls
    back to Ray's default policy, usually the local node. ``None`` targets (Ray's own SPREAD) and ``None``
    placements (actors not started yet) are not checked.
    """
    return [
        i
        for i, (t, p) in enumerate(zip(targets, placed, strict=True))
        if t is not None and p is not None and p != t and t in alive
    ]


class RewardActorPool:
    """Driver-side owner of the reward actors and of the local judge server.

    Create with :meth:`create`; pass :attr:`spec` (a small picklable dict of actor names and the judge URL) to
    EnvRunners through the AlgorithmConfig. Runners look the actors up by name.
    """

    def __init__(self, cfg: RewardPoolConfig, spec: dict[str, Any], judge_server: Any | None) -> None:
        self.cfg = cfg
        self.spec = spec
        self._judge_server = judge_server
        self._handles: list[Any] = []

    @classmethod
    def create(cls, cfg: RewardPoolConfig, name_prefix: str | None = None) -> RewardActorPool:
        """Start the judge (if needed), the ledger and the scorer groups, with uuid-suffixed actor names.

        Args:
            cfg: validated pool settings.
            name_prefix: actor name prefix; a uuid suffix is always appended (Tune trials must not collide).
        """
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from agentic_ray.rewards.judge_service import JudgeServer

        enabled = cfg.enabled_layers()
        judge_url, server = cfg.judge.base_url, None
        if "judge" in enabled and judge_url is None and cfg.mode != "zero_latency":
            server = JudgeServer(latency_ms=cfg.judge.latency_ms, mode=cfg.judge.server_mode).start()
            judge_url = server.base_url
        prefix = f"{name_prefix or 'agray-reward'}-{uuid.uuid4().hex[:8]}"
        ledger_path = cfg.ledger_path or str(Path(tempfile.mkdtemp(prefix="agray_ledger_")) / LEDGER_FILE)
        modes = {n: cfg.normalize_mode(n) for n in enabled}
        dump = cfg.model_dump(mode="json")
        ledger_name = f"{prefix}-ledger"
        here = ray.get_runtime_context().get_node_id()
        # Keep the handles: an actor whose last handle goes out of scope is destroyed, named or not.
        handles: list[Any] = [
            ray.remote(LedgerActor)
            .options(
                name=ledger_name,
                num_cpus=0,
                max_restarts=-1,
                max_task_retries=-1,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
            )
            .remote(ledger_path, modes, cfg.normalize_clip)
        ]
        groups: dict[str, list[str]] = {"cpu": [], "io": []}
        if cfg.mode in ("async", "blocking"):
            for group, cost, gcfg, actor_cls in (
                ("cpu", CostClass.ASYNC_CPU, cfg.cpu_group, CpuScorerActor),
                ("io", CostClass.ASYNC_IO, cfg.io_group, AsyncScorerActor),
            ):
                if not any(LAYER_CLASSES[n].cost is cost for n in enabled):
                    continue
                strategies = (
                    spread_strategies(gcfg.num_actors, gcfg.num_cpus, ray.nodes(), first=here)
                    if gcfg.scheduling_strategy == "SPREAD"
                    else ["DEFAULT"] * gcfg.num_actors
                )

                def start(name: str, strategy: Any, actor_cls: Any = actor_cls, gcfg: Any = gcfg) -> Any:
                    return (
                        ray.remote(actor_cls)
                        .options(
                            name=name,
                            num_cpus=gcfg.num_cpus,
                            max_concurrency=gcfg.max_concurrency,
                            max_restarts=gcfg.max_restarts,
                            max_task_retries=-1,
                            scheduling_strategy=strategy,
                        )
                        .remote(dump, judge_url, ledger_name)
                    )

                names = [f"{prefix}-{group}-{i}" for i in range(gcfg.num_actors)]
                group_handles = [start(n, st) for n, st in zip(names, strategies, strict=True)]
                targets = [getattr(st, "node_id", None) for st in strategies]
                if any(t is not None for t in targets):
                    names, group_handles = _repair_spread(names, group_handles, strategies, targets, start)
                handles.extend(group_handles)
                groups[group].extend(names)
        spec = {
            "prefix": prefix,
            "ledger": ledger_name,
            "ledger_path": ledger_path,
            "cpu": groups["cpu"],
            "io": groups["io"],
            "judge_url": judge_url,
        }
        pool = cls(cfg, spec, server)
        pool._handles = handles
        ray.get(pool.ledger.pid.remote())  # fail fast if the ledger cannot open its file
        return pool

    @property
    def ledger(self) -> Any:
        """Handle of the ledger actor."""
        import ray

        return ray.get_actor(self.spec["ledger"])

    def actors(self, group: str) -> list[Any]:
        """Handles of the ``"cpu"`` or ``"io"`` group."""
        import ray

        return [ray.get_actor(n) for n in self.spec[group]]

    def audit(self) -> LedgerAudit:
        """Run the ledger audit (see :mod:`agentic_ray.rewards.ledger_audit`)."""
        import ray

        return ray.get(self.ledger.audit.remote())

    def save(self, directory: str | Path) -> Path:
        """Back the ledger (with the normaliser state inside) up to ``directory/reward_ledger.sqlite``."""
        import ray

        dest = Path(directory) / LEDGER_FILE
        ray.get(self.ledger.backup.remote(str(dest)))
        return dest

    def restore(self, directory: str | Path) -> None:
        """Load a ledger saved by :meth:`save` (rows and normaliser state)."""
        import ray

        ray.get(self.ledger.restore.remote(str(Path(directory) / LEDGER_FILE)))

    def shutdown(self) -> None:
        """Kill the actors and stop the local judge."""
        import ray

        for name in [self.spec["ledger"], *self.spec["cpu"], *self.spec["io"]]:
            with contextlib.suppress(ValueError):
                ray.kill(ray.get_actor(name), no_restart=True)
        if self._judge_server is not None:
            self._judge_server.stop()
            self._judge_server = None


def _repair_spread(
    names: list[str], handles: list[Any], strategies: list[Any], targets: list[str | None], start: Any
) -> tuple[list[str], list[Any]]:
    """Restart (under a new name) each actor that :func:`misplaced` finds off its target node; a few tries.

    Returns the final names and handles. If an actor is still off target after the last try, it stays where it
    is (the pool works, only less spread) and a warning says so.
    """
    import logging
    import time

    import ray

    base, names, handles = list(names), list(names), list(handles)
    for attempt in range(1, SPREAD_PLACEMENT_ATTEMPTS + 1):
        refs = [h.node_id.remote() for h in handles]
        # An actor still waiting for resources (num_cpus > 0 on a busy cluster) is left alone, not waited for.
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PLACEMENT_WAIT_S)
        placed = [ray.get(r) if r in ready else None for r in refs]
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        bad = misplaced(targets, placed, alive)
        if not bad:
            return names, handles
        if attempt == SPREAD_PLACEMENT_ATTEMPTS:
            break
        time.sleep(0.5 * attempt)  # give the raylets' cluster views time to catch up
        for i in bad:
            ray.kill(handles[i], no_restart=True)
            names[i] = f"{base[i]}-r{attempt}"
            handles[i] = start(names[i], strategies[i])
    logging.getLogger(__name__).warning(
        "reward actors %s are not on their SPREAD target nodes after %d tries",
        [names[i] for i in bad],
        SPREAD_PLACEMENT_ATTEMPTS,
    )
    return names, handles
