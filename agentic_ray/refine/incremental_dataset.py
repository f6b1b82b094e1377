"""The incremental dataset: windows over served episodes, counterfactual hard negatives, active sampling.

* **Windows** of ``window`` steps every ``stride`` steps (5 and 3 by default; an episode shorter than a window
  is one window). A window's id is ``<episode>:<first step>``, what the refiner records as consumed.
* **Pivot**: the window's first failed step; else its first step where the recorded call's skill is not the
  rule-based policy's (a failed episode whose calls all succeeded went wrong where it left the fix's path: a
  prerequisite skipped, a premature end); else its first step. Measured on ``benchmarks/refine.py``: with the
  first step as the pivot, all 12 windows of the dominant class (``missing_prerequisite``) pivoted where the
  policy already did what the fix does, so the update had nothing to learn and the class's share stayed at 0.15.
* **Counterfactuals**: at the pivot, the recorded world state is rebuilt (:func:`~agentic_ray.refine.
  served_episodes.replay_prefix`) and each alternative is simulated there: the recorded call with another skill
  (masked ones included: the env answers them with its masked error, as it would have), and the rule-based
  policy's call (the *fix*); every simulated episode is finished by the rule-based policy and re-scored with the
  reward layers (:class:`~agentic_ray.refine.rescoring.EpisodeRescorer`). The alternatives worse than the fix,
  the ``hard_negatives`` worst first, are the window's hard negatives: first those the state's skill mask allows
  (a masked one has zero probability under the policy, so its pairwise term in the update is exactly 0), then
  masked ones where too few allowed ones are worse than the fix.
* **Active sampling**: a window's information is how much the fix would have changed the return at its pivot
  (``|fix return - recorded return|``, the advantage of the correction). A window with no failed step whose
  information is below ``min_information`` shows the policy doing what the fix does, teaches nothing new, and is
  dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.eval.metrics import root_cause
from agentic_ray.refine.refine_config import RefineConfig
from agentic_ray.refine.rescoring import EpisodeRescorer
from agentic_ray.refine.served_episodes import ServedEpisode, expert_action, finish_with, replay_prefix

__all__ = ["DatasetStats", "WindowSample", "build_dataset", "window_starts"]


def window_starts(num_steps: int, window: int, stride: int) -> list[int]:
    """First steps of the windows of an episode of ``num_steps`` steps (one window if it is shorter)."""
    return list(range(0, max(num_steps - window, 0) + 1, stride))


@dataclass
class WindowSample:
    """One window, at its pivot step.

    Attributes:
        window_id: ``<episode>:<first step>``.
        episode_id: the served episode.
        pivot: the step the counterfactuals branch from.
        failed: whether a step of the window failed.
        cause: the episode's root cause by evaluation's rules (None: it completed).
        step_cause: the root cause the env attributed to the pivot step (None: it succeeded).
        skill: the skill called at the pivot.
        obs: the observation before the pivot.
        action: the recorded action at the pivot.
        fix: the rule-based policy's action at the pivot.
        fix_skill: its skill.
        value: the recorded episode's re-scored return.
        fix_value: the return with the fix at the pivot.
        negatives: ``(action, return)`` of the hard negatives, worst first.
        information: ``|fix_value - value|``.
    """

    window_id: str
    episode_id: str
    pivot: int
    failed: bool
    cause: str | None
    step_cause: str | None
    skill: str
    obs: dict[str, np.ndarray]
    action: Any
    fix: Any
    fix_skill: str
    value: float
    fix_value: float
    negatives: list[tuple[Any, float]] = field(default_factory=list)
    information: float = 0.0


@dataclass(frozen=True)
class DatasetStats:
    """What building the dataset kept and dropped."""

    windows: int
    kept: int
    dropped: int
    hard_negatives: int

    @property
    def filtered_share(self) -> float:
        """Share of the windows active sampling dropped."""
        return self.dropped / self.windows if self.windows else 0.0

    @property
    def hard_negative_share(self) -> float:
        """Hard negatives among the kept samples (each kept window is one positive, its fix)."""
        n = self.kept + self.hard_negatives
        return self.hard_negatives / n if n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "windows": self.windows,
            "kept": self.kept,
            "dropped": self.dropped,
            "hard_negatives": self.hard_negatives,
            "filtered_share": self.filtered_share,
            "hard_negative_share": self.hard_negative_share,
        }


def _allowed(obs: dict[str, np.ndarray]) -> Any:
    """Whether the state's skill mask allows an action's skill (True where the observation has no mask)."""
    mask = obs.get("skill_mask")
    return lambda a: mask is None or not isinstance(a, dict) or bool(mask[int(a["skill"])])


def _alternatives(action: Any, num_skills: int, limit: int) -> list[Any]:
    """The recorded action with each other skill, in skill order after the recorded one (at most ``limit``)."""
    if not isinstance(action, dict) or "skill" not in action:
        return []
    k = int(action["skill"])
    out: list[Any] = []
    for j in range(1, num_skills):
        if len(out) >= limit:
            break
        alt = dict(action)
        alt["skill"] = np.asarray((k + j) % num_skills, dtype=np.asarray(action["skill"]).dtype)
        out.append(alt)
    return out


def _skill_of(action: Any) -> int | None:
    return int(action["skill"]) if isinstance(action, dict) and "skill" in action else None


def _first_departure(env: AgentTaskEnv, ep: ServedEpisode, start: int, n: int) -> tuple[int, Any]:
    """The first of steps ``start .. start + n - 1`` whose recorded skill is not the rule-based policy's, with
    that policy's action there; else ``start`` and its action there. Replays the prefix once and steps the
    recorded actions forward (one replay per window, not one per step)."""
    replay_prefix(env, ep, start)
    first: tuple[int, Any] | None = None
    for t in range(start, start + n):
        fix = expert_action(env)
        if first is None:
            first = (t, fix)
        if _skill_of(fix) != _skill_of(ep.actions[t]):
            return t, fix
        env.step(ep.actions[t])
    assert first is not None  # n >= 1: a window holds at least one step
    return first


def build_dataset(
    episodes: Sequence[ServedEpisode],
    env: AgentTaskEnv,
    rescorer: EpisodeRescorer,
    cfg: RefineConfig,
    consumed: Iterable[str] = (),
) -> tuple[list[WindowSample], DatasetStats]:
    """The kept window samples of ``episodes`` (replayed) and the counts (see the module docstring).

    Args:
        episodes: replayed served episodes (``record`` and ``obs`` set).
        env: an env of the served config (its state is overwritten).
        rescorer: the reward layers.
        cfg: window, stride, alternatives, hard negatives, information threshold.
        consumed: window ids used before (skipped, not counted).
    """
    done = set(consumed)
    base = rescorer.score([(ep.session_id, ep.record) for ep in episodes if ep.record is not None])
    kept: list[WindowSample] = []
    windows = dropped = negatives = 0
    for ep in episodes:
        rec = ep.record
        if rec is None or ep.session_id not in base:
            continue
        for s in window_starts(rec.num_steps, cfg.window, cfg.stride):
            wid = f"{ep.session_id}:{s}"
            if wid in done:
                continue
            windows += 1
            steps = rec.steps[s : s + cfg.window]
            failed_at = [s + i for i, st in enumerate(steps) if not st.ok]
            if failed_at:
                pivot = failed_at[0]
                replay_prefix(env, ep, pivot)
                fix = expert_action(env)
            else:
                pivot, fix = _first_departure(env, ep, s, len(steps))
            fix_skill = env.skills[int(fix["skill"])] if isinstance(fix, dict) and "skill" in fix else ""
            sims: list[tuple[str, Any]] = [("fix", fix)]
            sims += [
                (f"alt{i}", a)
                for i, a in enumerate(_alternatives(ep.actions[pivot], len(env.skills), cfg.max_alternatives))
            ]
            runs = []
            for name, a in sims:
                replay_prefix(env, ep, pivot)
                runs.append((f"{wid}:{name}", finish_with(env, a)))
            scored = rescorer.score(runs)
            fix_value = scored[f"{wid}:fix"].value if f"{wid}:fix" in scored else base[ep.session_id].value
            alts = [
                (a, scored[k].value)
                for (k, _r), (_n, a) in zip(runs[1:], sims[1:], strict=True)
                if k in scored
            ]
            info = abs(fix_value - base[ep.session_id].value)
            if not failed_at and info < cfg.min_information:
                dropped += 1
                continue
            # the worst alternatives the policy can choose first (a masked one has zero probability: its pairwise
            # term would be exactly 0), masked ones only where too few allowed ones are worse than the fix
            allowed = _allowed(ep.obs[pivot])
            worse = sorted((x for x in alts if x[1] < fix_value), key=lambda x: (not allowed(x[0]), x[1]))[
                : cfg.hard_negatives
            ]
            negatives += len(worse)
            st = rec.steps[pivot]
            kept.append(
                WindowSample(
                    wid,
                    ep.session_id,
                    pivot,
                    bool(failed_at),
                    root_cause(rec),
                    st.root_cause,
                    st.skill,
                    ep.obs[pivot],
                    ep.actions[pivot],
                    fix,
                    fix_skill,
                    base[ep.session_id].value,
                    fix_value,
                    worse,
                    info,
                )
            )
    return kept, DatasetStats(windows, len(kept), dropped, negatives)
