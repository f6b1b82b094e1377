"""The canary router: splits traffic between the stable policy and a candidate in steps, and promotes or rolls
back the candidate from live TCSR, DVR and task completion.

A plain class with an injected clock and log sink; the gateway deployment owns one and feeds it outcomes.

Live metrics (per arm, counted since the canary started):

* **TCSR** = successful tool calls / calls decided by the arm: every agent-mode step (the executor's result),
  and every transcript call a ``/v1/act`` client reports back with the ``trace_id`` of the decision that
  proposed it.
* **DVR** = episodes with a valid plan / episodes: agent-mode episodes (the env's ``dag_valid``), plus feedback
  on a decision or an episode: ``outcome: success`` counts as a valid plan, ``reason: wrong_steps`` as an
  invalid one; other feedback reasons (outdated, not_solved, other) are stored but say nothing about the plan.
* **Completion** = completed tasks / episodes whose outcome is known: agent-mode episodes (the env's
  ``completed``), plus feedback ``outcome: success`` (completed) and ``reason: not_solved`` (not completed).
  TCSR and DVR alone cannot tell a random policy from a good one behind state-aware masks: measured on the
  e-commerce validation tasks (60 agent-mode episodes, no faults), a sampled untrained policy had TCSR 0.849
  and DVR 0.883 against 0.878 and 1.0 for a 120-demonstration imitation policy, but completed 1.7% of the tasks
  against 90%; the canary test promoted the random candidate on TCSR and DVR alone.

Decisions:

* **rollback**, checked after every outcome once both arms hold the minimum sample: the candidate's TCSR is
  more than ``tcsr_margin`` below stable's, its DVR more than ``dvr_margin`` below, or its completion more than
  ``completion_margin`` below, *with confidence*: the
  one-sided z of ``stable - candidate - margin`` (Agresti-Caffo adjusted Wald) exceeds ``z``. The point
  estimates alone are not enough: with 200 calls per arm at TCSR 0.95 the standard error of the difference is
  about 2 points, and the rule "0.5 points lower at the minimum sample" rolled back a candidate equal to stable
  in 37% of 300 simulated canaries (the z rule: 0%; ``tests/unit/serving/test_canary.py`` checks both). After
  too many failed requests to the candidate (``max_candidate_errors``) it rolls back as well.
* **advance** to the next traffic step when the candidate has the minimum sample *in this step* and has spent
  ``min_step_s`` there without a rollback; advancing past the last step (share 1.0) is **promotion**.

The sample sets what can be detected: at 200 calls per arm and TCSR 0.95 a candidate 10 points worse was
rolled back at the minimum sample in 51% of the simulated canaries, 3 points worse in 0.3% (both arms keep
sampling, so a clear regression is caught within a few hundred more calls); a 0.5-point drop needs tens of
thousands of calls per arm to show.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentic_ray.serving.settings import CanarySettings

__all__ = ["ArmCounts", "CanaryRouter", "clustered_rate_var", "rollback_z"]

Arm = Literal["stable", "candidate"]
State = Literal["off", "canary", "promoted", "rolled_back"]


@dataclass
class ArmCounts:
    """Outcome counts of one arm."""

    calls: int = 0
    ok_calls: int = 0
    episodes: int = 0
    valid_episodes: int = 0
    outcome_episodes: int = 0
    completed_episodes: int = 0
    errors: int = 0
    clusters: OrderedDict[str, list[int]] = field(default_factory=OrderedDict, repr=False)
    """``{episode or conversation: [ok, n]}`` of the open clusters (the TCSR test's cluster-robust variance),
    least recently used first."""
    closed_clusters: int = 0
    """Clusters no longer in :attr:`clusters`: single calls without a key, and conversations evicted past
    :attr:`max_open_clusters`. Their terms stay in the running sums."""
    max_open_clusters: int = field(default=20_000, repr=False)
    """Bound on :attr:`clusters`, so that a long-running gateway's memory does not grow with every conversation
    it has seen. A conversation evicted and then continued counts as a new cluster from there on."""
    _sums: list[int] = field(default_factory=lambda: [0, 0, 0], repr=False)
    """Running ``[sum ok_i^2, sum ok_i n_i, sum n_i^2]`` over the clusters, so that the rollback test, which runs
    after every outcome of a Serve request, costs O(1) instead of a pass over every conversation."""

    def add_call(self, ok: bool, cluster: str | None) -> None:
        self.calls += 1
        self.ok_calls += int(ok)
        if cluster is None:  # a cluster of one call, closed at once
            self.closed_clusters += 1
            self._sums[0] += int(ok)
            self._sums[1] += int(ok)
            self._sums[2] += 1
            return
        c = self.clusters.get(cluster)
        if c is None:
            c = self.clusters[cluster] = [0, 0]
            if len(self.clusters) > self.max_open_clusters:
                self.clusters.popitem(last=False)
                self.closed_clusters += 1
        else:
            self.clusters.move_to_end(cluster)
        o, n = c
        c[0], c[1] = o + int(ok), n + 1
        self._sums[0] += c[0] * c[0] - o * o
        self._sums[1] += c[0] * c[1] - o * n
        self._sums[2] += c[1] * c[1] - n * n

    @property
    def num_clusters(self) -> int:
        return len(self.clusters) + self.closed_clusters

    @property
    def cluster_var(self) -> float:
        """:func:`clustered_rate_var` of every cluster (open and closed), from the running sums."""
        m, total = self.num_clusters, self.calls
        if m < 2 or total == 0:
            return 0.0
        p = self.ok_calls / total
        oo, on, nn = self._sums
        return m / (m - 1) * max(oo - 2 * p * on + p * p * nn, 0.0) / total**2

    @property
    def tcsr(self) -> float | None:
        return self.ok_calls / self.calls if self.calls else None

    @property
    def dvr(self) -> float | None:
        return self.valid_episodes / self.episodes if self.episodes else None

    @property
    def completion(self) -> float | None:
        return self.completed_episodes / self.outcome_episodes if self.outcome_episodes else None

    def summary(self) -> dict[str, Any]:
        counts = ("calls", "ok_calls", "episodes", "valid_episodes", "outcome_episodes", "completed_episodes")
        return {
            **{k: getattr(self, k) for k in (*counts, "errors")},
            "clusters": self.num_clusters,
            "tcsr": self.tcsr,
            "dvr": self.dvr,
            "completion": self.completion,
        }


def rollback_z(
    stable_ok: int,
    stable_n: int,
    cand_ok: int,
    cand_n: int,
    margin: float,
    stable_cluster_var: float | None = None,
    cand_cluster_var: float | None = None,
) -> float:
    """One-sided z of "the candidate's rate is more than ``margin`` below stable's".

    Agresti-Caffo adjusted Wald: one success and one failure are added to each arm, which keeps the standard
    error positive when a rate is 0 or 1 (a perfect stable arm would otherwise give an infinite z).

    With ``*_cluster_var`` (an arm's :func:`clustered_rate_var` over its episodes or conversations) each arm's
    variance is the larger of the binomial one and the cluster-robust one: the calls of one episode are not
    independent. Measured in the serve test: a candidate with stable's own weights had TCSR 0.533 over its first
    30 calls, from 5 episodes, against 0.888 over 528 calls; the binomial z was 3.93 (> 3.09) and rolled it back.
    """
    ps = (stable_ok + 1) / (stable_n + 2)
    pc = (cand_ok + 1) / (cand_n + 2)
    vs = ps * (1 - ps) / (stable_n + 2)
    vc = pc * (1 - pc) / (cand_n + 2)
    if stable_cluster_var is not None:
        vs = max(vs, stable_cluster_var)
    if cand_cluster_var is not None:
        vc = max(vc, cand_cluster_var)
    return (ps - pc - margin) / math.sqrt(vs + vc)


def clustered_rate_var(clusters: Mapping[str, Sequence[int]]) -> float:
    """Cluster-robust variance of a pooled rate ``sum(ok) / sum(n)`` over clusters ``{key: (ok, n)}``: the
    linearised ratio-estimator variance ``m / (m - 1) * sum((ok_i - p n_i)^2) / N^2`` (0 below 2 clusters,
    where the binomial variance is used alone)."""
    m = len(clusters)
    total = sum(n for _ok, n in clusters.values())
    if m < 2 or total == 0:
        return 0.0
    p = sum(ok for ok, _n in clusters.values()) / total
    return m / (m - 1) * sum((ok - p * n) ** 2 for ok, n in clusters.values()) / total**2


@dataclass
class _Step:
    index: int
    started: float
    calls: int = 0
    episodes: int = 0


@dataclass
class CanaryRouter:
    """See the module docstring.

    Args:
        settings: steps, minimum sample, margins and the z threshold.
        has_candidate: False: every request goes to stable (state ``off``).
        clock: monotonic seconds (injected for tests).
        log: receives every decision as a dict with its numbers.
        max_candidate_errors: failed requests to the candidate that roll it back.
    """

    settings: CanarySettings
    has_candidate: bool
    clock: Callable[[], float] = time.monotonic
    log: Callable[[dict[str, Any]], None] = lambda _d: None
    max_candidate_errors: int = 5
    state: State = "off"
    counts: dict[str, ArmCounts] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.counts = {"stable": ArmCounts(), "candidate": ArmCounts()}
        self._step = _Step(0, self.clock())
        if self.has_candidate:
            self.state = "canary"
            self._decide("start", "canary started")

    # ------------------------------------------------------------------ routing
    @property
    def share(self) -> float:
        """The candidate's share of new traffic now."""
        if self.state == "canary":
            return self.settings.steps[self._step.index]
        return 1.0 if self.state == "promoted" else 0.0

    def assign(self, key: str) -> Arm:
        """The arm for a conversation or session: a stable hash of ``key`` against the share, so one
        conversation stays on one arm while the share holds (and moves to the candidate only as it grows)."""
        share = self.share
        if share <= 0.0:
            return "stable"
        if share >= 1.0:
            return "candidate"
        bucket = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64
        return "candidate" if bucket < share else "stable"

    def serving(self, arm: Arm) -> Arm:
        """Where a request assigned earlier to ``arm`` goes now (a rolled-back candidate's sessions move to
        stable)."""
        if arm == "candidate" and self.state in ("off", "rolled_back"):
            return "stable"
        return arm

    # ------------------------------------------------------------------ outcomes
    def record_call(self, arm: str, ok: bool, trace_id: str = "", cluster: str | None = None) -> None:
        """A tool call decided by ``arm`` finished (``ok``: its result code was OK); ``cluster``: its episode or
        conversation (None: a cluster of its own)."""
        c = self.counts.get(arm)
        if c is None:
            return
        c.add_call(ok, cluster)
        if arm == "candidate" and self.state == "canary":
            self._step.calls += 1
        self._evaluate(trace_id)

    def record_episode(
        self, arm: str, valid: bool | None, trace_id: str = "", completed: bool | None = None
    ) -> None:
        """An episode (or a conversation judged by feedback) decided by ``arm`` ended; ``valid``: its plan
        respected the goal DAG, ``completed``: it completed the task (None: not known)."""
        c = self.counts.get(arm)
        if c is None or (valid is None and completed is None):
            return
        if valid is not None:
            c.episodes += 1
            c.valid_episodes += int(valid)
        if completed is not None:
            c.outcome_episodes += 1
            c.completed_episodes += int(completed)
        if arm == "candidate" and self.state == "canary":
            self._step.episodes += 1
        self._evaluate(trace_id)

    def record_error(self, arm: str, trace_id: str = "") -> None:
        """A request to ``arm`` failed (the gateway answered it from stable instead)."""
        c = self.counts.get(arm)
        if c is None:
            return
        c.errors += 1
        if arm == "candidate" and self.state == "canary" and c.errors >= self.max_candidate_errors:
            self._rollback(f"{c.errors} failed requests to the candidate", trace_id)

    # ------------------------------------------------------------------ decisions
    def z_scores(self) -> dict[str, float | None]:
        """Rollback z of TCSR, DVR and completion (None until both arms hold the minimum sample)."""
        s, c, cfg = self.counts["stable"], self.counts["candidate"], self.settings
        out: dict[str, float | None] = {"tcsr": None, "dvr": None, "completion": None}
        if min(s.calls, c.calls) >= cfg.min_calls:
            out["tcsr"] = rollback_z(
                s.ok_calls, s.calls, c.ok_calls, c.calls, cfg.tcsr_margin, s.cluster_var, c.cluster_var
            )
        if min(s.episodes, c.episodes) >= cfg.min_episodes:
            out["dvr"] = rollback_z(
                s.valid_episodes, s.episodes, c.valid_episodes, c.episodes, cfg.dvr_margin
            )
        if min(s.outcome_episodes, c.outcome_episodes) >= cfg.min_episodes:
            out["completion"] = rollback_z(
                s.completed_episodes,
                s.outcome_episodes,
                c.completed_episodes,
                c.outcome_episodes,
                cfg.completion_margin,
            )
        return out

    def _evaluate(self, trace_id: str) -> None:
        if self.state != "canary":
            return
        z = self.z_scores()
        worse = [m for m, v in z.items() if v is not None and v > self.settings.z]
        if worse:
            self._rollback(
                f"candidate {' and '.join(worse).upper()} below stable beyond the margin", trace_id
            )
            return
        cfg, st = self.settings, self._step
        if (
            st.calls >= cfg.min_calls
            and st.episodes >= cfg.min_episodes
            and self.clock() - st.started >= cfg.min_step_s
        ):
            if st.index + 1 < len(cfg.steps):
                self._step = _Step(st.index + 1, self.clock())
                self._decide("advance", f"no regression at {cfg.steps[st.index]:.0%}", trace_id)
            else:
                self.state = "promoted"
                self._decide("promote", "no regression at every step", trace_id)

    def _rollback(self, reason: str, trace_id: str) -> None:
        self.state = "rolled_back"
        self._decide("rollback", reason, trace_id)

    def _decide(self, event: str, reason: str, trace_id: str = "") -> None:
        d = {
            "time": self.clock(),
            "event": event,
            "reason": reason,
            "state": self.state,
            "step": self._step.index,
            "share": self.share,
            "stable": self.counts["stable"].summary(),
            "candidate": self.counts["candidate"].summary(),
            "z": self.z_scores(),
            "z_threshold": self.settings.z,
            "trace_id": trace_id,
        }
        self.decisions.append(d)
        del self.decisions[:-100]
        self.log(d)

    def snapshot(self) -> dict[str, Any]:
        """State for ``/v1/metrics``."""
        return {
            "state": self.state,
            "step": self._step.index if self.state == "canary" else None,
            "steps": list(self.settings.steps),
            "share": self.share,
            "step_sample": {"calls": self._step.calls, "episodes": self._step.episodes},
            "min_sample": {"calls": self.settings.min_calls, "episodes": self.settings.min_episodes},
            "arms": {k: v.summary() for k, v in self.counts.items()},
            "z": self.z_scores(),
            "decisions": list(self.decisions[-20:]),
        }
