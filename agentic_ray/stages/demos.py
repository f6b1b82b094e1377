"""Scripted-expert demonstrations for imitation, with controlled wrong samples (seed 000: 18%).

Four kinds of trajectory (a clean one and three kinds of wrong sample), all on *training* task seeds:

* ``clean``: the expert solves the task;
* ``garbled``: every tool reply may arrive garbled (a valid JSON shell with garbled content); the expert sees
  the failed call and retries, so the data shows recovery from tool errors (``tool_error``);
* ``reversed``: the first step runs a goal whose prerequisite is not done yet (a reversed-step plan); the gateway
  rejects it, and from then on the expert follows the correct DAG;
* ``caller_error``: the env injects one error into the expert's calls (:mod:`agentic_ray.domains.caller_errors`),
  the causes in turn (``stages.il.caller_error_kinds``): a wrong entity, stale information, a parameter above its
  limit, and optionally the control, a one-off tool failure (the garbled demos show retries already). Each persists, so the expert's next call is the cause's own fix: after a wrong entity the lookup
  that re-resolves it, then the call; after stale information a re-read, then the call; after a bad parameter the
  call with the value at the revealed limit; after the tool failure the same call.

The wrong samples are split between the kinds by :data:`WRONG_KIND_WEIGHTS`: half of them caller errors, the
only kind whose fix depends on a diagnosis the rest of the observation does not give. Their corrections differ by
root cause (retry, run the prerequisite, re-read first, re-resolve the entity, copy the limit), which is what the
policy's reflection input is for. (An earlier kind, ``wrong_args``, put a look-alike argument into one call and
imitated the right call at once. It is gone: the injected errors persist, so that fix no longer exists for them;
most of its look-alikes drew a ``CONFLICT``, which to a caller reads like a stale write whose fix is a re-read;
and an injected wrong entity or bad parameter is the same mistake with its real fix.)

Every step carries a weight: 1 for an expert action (imitated), 0 for the wrong step (never imitated): the
reversed step, or the call the env made wrong. The latter matters for a bad parameter: the expert chose the
limit, the env sent more; imitating the expert's choice there would teach the policy to copy the limit before any
failure, so the demonstrations would never show what the diagnosis changes (the usual value first, the limit
after the failure).
Each wrong-sample episode is labelled with the root-cause class (``ROOT_CAUSES``) that the env attributed to its
first failed step; the reflection head itself learns from every step's ``obs["reflection"]``.

Every imitated action is checked against the masks of the step it is taken in
(:meth:`~agentic_ray.envs.agent_task_env.AgentTaskEnv.mask_violation`): an action the masks forbid has a
log-probability of about ``-1e9`` under the policy (the masked logit), so one such step dominates the imitation
loss (issue 26 measured an NLL of 8.78e6 from one soft-masked expert action). A forbidden action is a
:class:`ForbiddenDemoAction` naming the demonstration, the step, the skill and the mask's reason; the collector drops
that demonstration and reports what it dropped and why (:class:`DemoSet`), or raises with ``strict=True``. The wrong
step of a wrong sample is exempt: it is wrong on purpose and weighs 0.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentic_ray.domains.caller_errors import CALLER_ERROR_CAUSES
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord

GARBLED_RATE = 0.8
"""Per-attempt garble rate of ``garbled`` demos: with two retries, about half of their calls still fail."""

MAX_TASKS = 16
"""Tasks tried per ``caller_error`` demo (a task that cannot carry its cause gets none) before it falls back to a
clean one."""

WRONG_KINDS = ("garbled", "reversed", "caller_error")
WRONG_KIND_WEIGHTS = {"garbled": 1, "reversed": 1, "caller_error": 2}
"""Relative shares of the wrong-sample kinds."""


logger = logging.getLogger(__name__)


class ForbiddenDemoAction(ValueError):
    """An imitated action the masks of its step forbid.

    Attributes:
        demo: the demonstration's index in collection order.
        kind: its kind (``clean``, ``garbled``, ...).
        family: its task family.
        step: the step (0-based) that holds the action.
        skill: the action's skill.
        reason: the mask's reason (the hard, soft or business rule, or the argument that fails a precondition).
    """

    def __init__(self, demo: int, kind: str, family: str, step: int, skill: str, reason: str) -> None:
        super().__init__(
            f"demonstration {demo} ({kind}, {family}), step {step}: the expert's {skill} is forbidden by the "
            f"masks: {reason}"
        )
        self.demo, self.kind, self.family, self.step, self.skill, self.reason = (
            demo,
            kind,
            family,
            step,
            skill,
            reason,
        )


class DemoSet(list):  # type: ignore[type-arg]
    """The collected demonstrations (a list of :class:`Demo`), with what was dropped.

    Attributes:
        dropped: ``"<skill>: <reason>" -> count`` of demonstrations dropped for a forbidden action.
        errors: the :class:`ForbiddenDemoAction` of each dropped demonstration, in order.
    """

    def __init__(self, demos: Sequence[Demo] = (), errors: Sequence[ForbiddenDemoAction] = ()) -> None:
        super().__init__(demos)
        self.errors = list(errors)
        self.dropped: Counter[str] = Counter(f"{e.skill}: {e.reason}" for e in self.errors)

    @property
    def n_dropped(self) -> int:
        return len(self.errors)


@dataclass
class Demo:
    kind: str  # clean | garbled | reversed | caller_error
    family: str
    obs: list[dict[str, np.ndarray]] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    root_cause: int = -1  # index into ROOT_CAUSES, -1 for none
    completed: bool = False


def _wrong_first_action(env: AgentTaskEnv) -> Any | None:
    """An action for a goal whose prerequisites are not done (a reversed step), or None if every goal is ready."""
    task, state = env.task, env.state
    assert task is not None and state is not None
    ready = env.builder.goal_ready(state.goal_done)
    for i, g in enumerate(task.goals):
        if not ready[i] and not state.goal_done[i]:
            params = dict(g.args)
            params.update(g.numeric)
            try:
                return env.encode_action(g.skill, params)
            except KeyError:  # the goal names an entity no lookup has revealed yet
                continue
    return None


def collect_demos(
    env_config: AgentTaskEnvConfig,
    n: int,
    wrong_share: float = 0.18,
    seed: int = 0,
    on_demo: Callable[[], None] | None = None,
    caller_errors: Sequence[str] = CALLER_ERROR_CAUSES,
    strict: bool = False,
) -> DemoSet:
    """``n`` expert trajectories; ``wrong_share`` of them are controlled wrong samples (kinds by
    :data:`WRONG_KIND_WEIGHTS`).

    ``caller_errors``: the injected errors ``caller_error`` demos take in turn (add ``tool_error`` for the control).

    ``on_demo`` is called after each trajectory (progress).

    Returns:
        The demonstrations whose every imitated action the masks allow; ``.dropped`` and ``.errors`` say how many
        were dropped and why (see the module docstring).

    Raises:
        ForbiddenDemoAction: with ``strict``, at the first imitated action the masks forbid.
    """
    rng = np.random.default_rng(seed)
    clean_cfg = env_config.model_copy(
        update={"faults": env_config.faults.model_copy(update={"enabled": False})}
    )
    garbled_cfg = env_config.model_copy(
        update={
            "faults": env_config.faults.model_copy(
                update={
                    "enabled": True,
                    "start_share": 1.0,
                    "end_share": 1.0,
                    "kinds": {"garbage": 1.0},
                    "garbage_rate": GARBLED_RATE,
                }
            )
        }
    )
    caller_envs = {
        cause: AgentTaskEnv(
            clean_cfg.model_copy(
                update={
                    "faults": clean_cfg.faults.model_copy(
                        update={"caller_error_share": 1.0, "caller_errors": {cause: 1.0}}
                    )
                }
            )
        )
        for cause in caller_errors
    }
    envs = {"clean": AgentTaskEnv(clean_cfg), "garbled": AgentTaskEnv(garbled_cfg)}
    envs["reversed"] = envs["clean"]
    expert = envs["clean"].domain.expert()
    demos: list[Demo] = []
    errors: list[ForbiddenDemoAction] = []
    n_wrong = round(n * wrong_share)
    kinds = ["clean"] * (n - n_wrong)
    total = sum(WRONG_KIND_WEIGHTS.values())
    counts = {k: n_wrong * WRONG_KIND_WEIGHTS[k] // total for k in WRONG_KINDS}
    for j in range(n_wrong - sum(counts.values())):  # the remainder, one each in kind order
        counts[WRONG_KINDS[j % len(WRONG_KINDS)]] += 1
    for kind in WRONG_KINDS:
        kinds += [kind] * counts[kind]
    rng.shuffle(kinds)
    n_caller = 0
    for i, kind in enumerate(kinds):
        env = envs.get(kind) or caller_envs[caller_errors[n_caller % len(caller_errors)]]
        demo_seed = int(seed * 1_000_003 + i)
        wrong_at, wrong = -1, None
        if kind == "caller_error":  # the causes in turn, each on a task that can carry it
            n_caller += 1
            for retry in range(MAX_TASKS):
                env.reset(seed=demo_seed + retry * n)
                if env.caller_error is not None:
                    demo_seed += retry * n
                    break
        obs, _ = env.reset(seed=demo_seed)
        if kind == "reversed":
            wrong_at, wrong = 0, _wrong_first_action(env)
        d = Demo(
            kind=kind if wrong is not None or kind == "garbled" else "clean",
            family=env.task.family if env.task else "",
        )
        forbidden: ForbiddenDemoAction | None = None
        while True:
            injected = len(d.obs) == wrong_at and wrong is not None
            a = wrong if injected else env.encode_action(*expert.plan(env.view()))
            why = None if injected else env.mask_violation(a)
            if why is not None:
                forbidden = ForbiddenDemoAction(i, d.kind, d.family, len(d.obs), *why)
                if strict:
                    raise forbidden
                break  # the demonstration is dropped; the env's next reset starts afresh
            d.obs.append(obs)
            d.actions.append(a)
            d.weights.append(0.0 if injected else 1.0)
            obs, _, term, trunc, info = env.step(a)
            if info[STEP_TRACE].get("caller_error"):  # the expert's call ran with an injected error
                d.kind = "caller_error"
                d.weights[-1] = 0.0  # not imitated: what went out is not what the expert chose
            if d.kind != "clean" and d.root_cause < 0 and obs["reflection"].any():
                d.root_cause = int(obs["reflection"].argmax())  # the env's cause of the first failed step
            if term or trunc:
                d.completed = EpisodeRecord.from_dict(info[EPISODE_RECORD]).completed
                break
        if forbidden is None:
            demos.append(d)
        else:
            errors.append(forbidden)
            logger.warning("dropped %s", forbidden)
        if on_demo is not None:
            on_demo()
    for e in {id(v): v for v in [*envs.values(), *caller_envs.values()]}.values():
        e.close()
    return DemoSet(demos, errors)
