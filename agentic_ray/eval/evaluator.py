"""Deterministic evaluation on the fixed validation tasks: metrics, failure attribution, traces, CU ablation.

No training code: the evaluator takes any :class:`Policy` (an RLModule through :class:`ModulePolicy`, the scripted
expert, the random masked policy) and an env config, rolls every validation task of every family once with a
seed derived from the task, and returns metrics computed by :mod:`agentic_ray.eval.metrics`.

Episodes run in lockstep over a small set of envs so that the module sees batches (one forward per step for all
envs), which is what makes evaluation cheap on CPU.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from agentic_ray.domains import get_domain
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import RandomMaskedPolicy
from agentic_ray.eval.correction import CorrectionSplit, correction_pairs, correction_uplift_paired
from agentic_ray.eval.metrics import (
    EvalMetrics,
    attribute_failures,
    evaluate,
    first_action_after_failure,
)
from agentic_ray.eval.traces import score_trace_layers
from agentic_ray.graph_spec import GOAL_NODE_TYPE, ROOT_CAUSES, SESSION_NODE_TYPE, TOOL_NODE_TYPE
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import RewardLayer

HYPOTHESES = {
    "tool_error": (
        "the tool is slow or down right now",
        "retry once; if it fails again, use its fallback or hand off",
    ),
    "bad_parameters": (
        "an argument is out of contract or above its limit",
        "call again at once with the task's own values",
    ),
    "dependency_violation": ("a step ran before its prerequisite", "run the prerequisite goal's skill first"),
    "missing_prerequisite": (
        "a business precondition is not met yet",
        "call the skill the precondition names",
    ),
    "wrong_entity": (
        "the call named an entity the request is not about",
        "point the call at the entity from the request",
    ),
    "stale_information": (
        "the call relied on a value that has changed since it was read",
        "re-read the entity, then call again with the fresh value",
    ),
    "risk_violation": (
        "a high-risk action ran without its safety check",
        "run the safety check the skill's risk contract names before the risky call",
    ),
}
"""Reflection triples: root cause → (verifiable hypothesis, minimal experiment)."""


class Policy(Protocol):
    """Chooses one action per env."""

    def act_batch(
        self, obs: list[dict[str, np.ndarray]], envs: list[AgentTaskEnv]
    ) -> tuple[list[Any], list[dict]]:
        """Returns (actions, per-env debug dicts)."""
        ...


class ExpertPolicy:
    """The domain's scripted expert, through the protocol (it reads each env's episode view)."""

    def act_batch(
        self, obs: list[dict[str, np.ndarray]], envs: list[AgentTaskEnv]
    ) -> tuple[list[Any], list[dict]]:
        return [e.encode_action(*e.domain.expert().plan(e.view())) for e in envs], [{} for _ in envs]


class RandomPolicy:
    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._policy: RandomMaskedPolicy | None = None

    def act_batch(
        self, obs: list[dict[str, np.ndarray]], envs: list[AgentTaskEnv]
    ) -> tuple[list[Any], list[dict]]:
        if self._policy is None:
            self._policy = RandomMaskedPolicy(envs[0].layout, self.seed)
        return [self._policy.act(o) for o in obs], [{} for _ in envs]


def stack_obs(
    obs: Sequence[dict[str, np.ndarray]], device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """A list of observations → a dict of batched tensors (copies: the tensors never share the observations'
    memory).

    One observation (a served decision, a batch-1 evaluation step) skips ``np.stack`` and the no-op ``.to`` on
    the CPU: with ~46 keys those cost 0.2 ms of a 0.3 ms call (``thread_time``, tiny config)."""
    if len(obs) == 1 and torch.device(device).type == "cpu":
        return {k: torch.from_numpy(np.array(v)[None]) for k, v in obs[0].items()}
    return {k: torch.from_numpy(np.stack([o[k] for o in obs])).to(device) for k in obs[0]}


def unbatch_actions(actions: Any, n: int) -> list[Any]:
    """Batched module actions (tensor or dict of tensors) → one env action per row."""
    if isinstance(actions, dict):
        a = {k: v.detach().cpu().numpy() for k, v in actions.items()}
        out = []
        for i in range(n):
            row = {k: v[i] for k, v in a.items()}
            row["skill"] = int(row["skill"])
            row["numeric"] = row["numeric"].astype(np.float32)
            if "members" in row:
                row["members"] = row["members"].astype(np.int64)
            out.append(row)
        return out
    return [int(x) for x in actions.detach().cpu().numpy().reshape(n)]


@dataclass
class PolicyForward:
    """What one batched forward of :class:`ModulePolicy` produced.

    Attributes:
        actions: one env action per observation.
        debug: the module's batched debug outputs (None unless ``debug``).
        batch: the stacked observation tensors.
        dist: the action distribution (deterministic when greedy); for structured actions ``dist.parts.skill``
            holds the masked ``(B, K)`` skill logits.
        sample: the batched sample the actions were unbatched from.
    """

    actions: list[Any]
    debug: dict[str, Any] | None
    batch: dict[str, torch.Tensor]
    dist: Any
    sample: Any = None


class ModulePolicy:
    """Greedy (or sampled) actions from an RLModule, with optional debug outputs for traces.

    Args:
        module: an RLModule with ``forward_inference`` (e.g. :class:`~agentic_ray.models.aaac_rl_module.AAACRLModule`).
        deterministic: greedy actions (evaluation) instead of samples.
        reflection: give the policy its diagnosis of the last failed step (the reflection head's, or
            ``obs["reflection"]`` with the oracle ``reflection_source="oracle_env"``); False withholds it, the
            failure evidence staying (the CU ablation; modules without the ``reflection_enabled`` forward switch get
            a zeroed ``obs["reflection"]``).
        evidence: give the policy the failure evidence; False withholds it and the diagnosis made from it (the
            evidence-uplift ablation; needs ``reflection=False``).
        debug: ask the module for debug outputs (probabilities, attention, gates).
        fast: act through the module's inference path (``forward_inference_fast``, when it has one and no debug
            outputs are asked for): the same logits as ``forward_inference`` within float rounding, in fewer
            tensor operations (:mod:`agentic_ray.models.inference_policy`). False uses ``forward_inference``.
    """

    def __init__(
        self,
        module: Any,
        deterministic: bool = True,
        reflection: bool = True,
        debug: bool = False,
        evidence: bool = True,
        fast: bool = True,
    ) -> None:
        if reflection and not evidence:
            raise ValueError("a diagnosis without the failure evidence it is made from is not a condition")
        self.module = module
        self.deterministic = deterministic
        self.reflection = reflection
        self.evidence = evidence
        self.debug = debug
        self.fast = fast
        self.dist_cls = module.get_inference_action_dist_cls()

    @torch.no_grad()
    def forward(self, obs: Sequence[dict[str, np.ndarray]]) -> PolicyForward:
        """One batched forward (serving calls this directly: it has observations, not envs)."""
        from ray.rllib.core.columns import Columns

        batch = stack_obs(obs)
        kw: dict[str, Any] = {"debug_outputs": True} if self.debug else {}
        if not self.reflection:  # the module's own switch: a zero reflection input whatever its source
            kw["reflection_enabled"] = False
            if "reflection" in batch:
                batch["reflection"] = torch.zeros_like(batch["reflection"])
        if not self.evidence:
            kw["evidence_enabled"] = False
        fast = getattr(self.module, "forward_inference_fast", None) if self.fast and not self.debug else None
        out = (fast or self.module.forward_inference)({Columns.OBS: batch}, **kw)
        dist = self.dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS])
        if self.deterministic:
            dist = dist.to_deterministic()
        sample = dist.sample()
        acts = unbatch_actions(sample, len(obs))
        return PolicyForward(acts, out.get("debug_outputs") if self.debug else None, batch, dist, sample)

    @torch.no_grad()
    def act_batch(
        self, obs: list[dict[str, np.ndarray]], envs: list[AgentTaskEnv]
    ) -> tuple[list[Any], list[dict]]:
        from ray.rllib.core.columns import Columns

        fw = self.forward(obs)
        acts, dbg, batch, dist, sample = fw.actions, fw.debug, fw.batch, fw.dist, fw.sample
        debugs = [_row_debug(dbg, i, envs[i], obs[i]) if dbg else {} for i in range(len(obs))]
        if self.debug and hasattr(dist, "parts") and isinstance(sample, dict):
            from agentic_ray.models.skill_argument_functional import member_probs, numeric_params

            views = (
                dist.parts.pointer_by_slot(dist.packed_layout),
                member_probs(dist.parts, dist.packed_layout),
                numeric_params(dist.parts, dist.packed_layout, sample["skill"], sample["pointer"]),
            )
            for i, d in enumerate(debugs):
                j = int(sample["skill"][i])  # a skill, or in prototype mode a prototype of a skill
                k = envs[i].skills.index(envs[i].prototypes[j].skill) if envs[i].prototypes else j
                d.update(_argument_debug(dist.parts, views, j, i, envs[i], skill=k))
        if self.debug and hasattr(self.module, "model") and hasattr(self.module.model, "reflection_logits"):
            probs = torch.softmax(
                self.module.model.reflection_logits(self.module._obs({Columns.OBS: batch})), -1
            )
            for i, d in enumerate(debugs):
                d["reflection_probs"] = probs[i].cpu().numpy().tolist()
        return acts, debugs


def _argument_debug(
    parts: Any,
    views: tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]],
    k: int,
    i: int,
    env: AgentTaskEnv,
    top_k: int = 3,
    skill: int | None = None,
) -> dict[str, Any]:
    """The chosen skill's argument distributions for row ``i``, named by argument and by node/choice.

    Everything is read from the env's generic action codec (``env.codec.params``: each contract parameter's
    kind and slot) and observation builder (node order), so any domain's skills are labelled the same way.

    Args:
        parts: the action distribution's :class:`~agentic_ray.models.skill_argument_functional.PackedActionLogits`
            (``enum (B, K, E, Me)``, ``source (B, K, N, C1)``, ``numeric_mean``/``numeric_log_std (B, K, N)``),
            masked as the policy sampled from them.
        views: its pointer logits by slot ``(B, K, P, Mp1)`` (``PackedActionLogits.pointer_by_slot``), its list
            member probabilities ``(B, K, L, Mp)`` (``member_probs``: a set's inclusion marginals, a sequence's
            first member), and the numeric mean and log-std ``(B, N)`` of the sampled skill at its sampled pointers
            (``numeric_params``: with ``numeric_on_pointer`` they depend on the pointer).
        k: the choice the policy made for this row (its skill; in prototype mode, the prototype).
        i: the row.
        env: the env the row acts in.
        top_k: how many choices to list.
        skill: the skill the choice acts with (default ``k``): its contract labels the arguments.

    Returns:
        ``{"pointer": {arg: [[node id, p], ...]}, "members": {arg: [[node id, p(in set / first)], ...]},
        "enum": {arg: [[choice, p], ...]}, "numeric": {arg: {"mean", "sigma", "copy": [[source, p], ...]}}}``
        (raw action units; the trace's ``args`` hold the decoded value); the top ``top_k`` choices with non-zero
        probability. A pointer's last choice is ``"(left out)"``; a numeric ``copy`` of ``"(free value)"`` means
        the mean/σ value is used.
    """
    out: dict[str, dict[str, Any]] = {"pointer": {}, "members": {}, "enum": {}, "numeric": {}}
    pointer, members, (num_mean, num_log_std) = views
    spec, ids = env.graph_spec, env.builder.node_ids
    sources = spec.source_table()

    def source_label(c: int) -> str:
        if c == 0:
            return "(free value)"
        j, node = sources[c - 1]
        src = spec.numeric_sources[j]
        nodes = ids.get(src.node_type, [])
        return f"{nodes[node] if node < len(nodes) else f'{src.node_type}[{node}]'}.{src.field}"

    def top(labels: list[Any], probs: torch.Tensor) -> list[list[Any]]:
        order = torch.argsort(probs, descending=True)[:top_k].tolist()
        return [[labels[j], float(probs[j])] for j in order if float(probs[j]) > 0.0]

    kind_of = {"pointer", "list"} if env.prototypes else {"pointer", "list", "enum", "numeric"}
    skill = k if skill is None else skill
    for ps in env.codec.params[skill] if skill < len(env.codec.params) else []:
        if ps.kind not in kind_of:  # a prototype fixes enum values and the numeric rule
            continue
        if ps.kind == "pointer":
            labels: list[Any] = list(ids.get(ps.spec.node_type, []))
            probs = torch.softmax(pointer[i, k, ps.slot].float(), -1)
            labels = labels + [None] * (probs.shape[-1] - 1 - len(labels)) + ["(left out)"]
            keep = [j for j, lab in enumerate(labels) if lab is not None]
            out["pointer"][ps.name] = top([labels[j] for j in keep], probs[keep])
        elif ps.kind == "list":
            labels = list(ids.get(ps.spec.node_type, []))
            out["members"][ps.name] = top(labels, members[i, k, ps.slot, : len(labels)].float())
        elif ps.kind == "enum":
            labels = list(getattr(ps.spec, "choices", None) or [False, True])
            probs = torch.softmax(parts.enum[i, k, ps.slot].float(), -1)[: len(labels)]
            out["enum"][ps.name] = top(labels, probs)
        elif ps.kind == "numeric":
            src_p = torch.softmax(parts.source[i, k, ps.slot].float(), -1)
            out["numeric"][ps.name] = {
                "mean": float(num_mean[i, ps.slot]),
                "sigma": float(num_log_std[i, ps.slot].exp()),
                "copy": top([source_label(c) for c in range(min(len(src_p), len(sources) + 1))], src_p),
            }
    return {key: v for key, v in out.items() if v}


def _row_debug(dbg: dict[str, Any], i: int, env: AgentTaskEnv, obs: dict[str, np.ndarray]) -> dict[str, Any]:
    """One env's slice of the module's debug outputs, with node names instead of indices.

    Attention is reported for the last message-passing layer only: per relation, the three real edges with the
    highest weight (mean over heads) as ``[source node, destination node, weight]``. Relations whose every
    destination has a single neighbour (weight 1 by construction) are left out.
    """
    out: dict[str, Any] = {}
    protos = getattr(env, "prototypes", None)
    if "top_skills" in dbg and not protos:
        idx = dbg["top_skills"][i].tolist()
        pr = dbg["top_skill_probs"][i].tolist()
        out["top_skills"] = [[env.skills[j], float(p)] for j, p in zip(idx, pr, strict=True)]
    att = dbg.get("attention") or {}
    last = max((k.split("/", 1)[0] for k in att), default=None)
    names = {
        **getattr(env.builder, "node_ids", {}),
        TOOL_NODE_TYPE: list(env.skills),
        SESSION_NODE_TYPE: [SESSION_NODE_TYPE],
        GOAL_NODE_TYPE: [g.id for g in env.task.goals] if env.task else [],
    }
    out["attention"] = {}
    for key, w in att.items():
        layer, rel = key.split("/", 1)
        if layer != last:
            continue
        src, r, dst = rel.split("__")
        fwd = f"{dst}__{r[4:]}__{src}" if r.startswith("rev_") else rel
        if f"{fwd}_ei" not in obs:
            continue
        ei, em = obs[f"{fwd}_ei"], obs[f"{fwd}_mask"].astype(bool)
        s_idx, d_idx = (ei[1], ei[0]) if r.startswith("rev_") else (ei[0], ei[1])
        wr = w[i].float()
        wr = (wr.mean(-1) if wr.dim() > 1 else wr).cpu().numpy()[: len(em)]
        real = np.flatnonzero(em[: len(wr)])
        if len(real) == 0 or np.allclose(wr[real], 1.0):
            continue
        top = real[np.argsort(-wr[real])[:3]]
        sn, dn = names.get(src, []), names.get(dst, [])
        out["attention"][rel] = [
            [
                sn[s_idx[e]] if s_idx[e] < len(sn) else int(s_idx[e]),
                dn[d_idx[e]] if d_idx[e] < len(dn) else int(d_idx[e]),
                float(wr[e]),
            ]
            for e in top
        ]
    out["gates"] = {
        k: float(v[i].float().mean())
        for k, v in (dbg.get("gates") or {}).items()
        if k.split("/", 1)[0] == last
    }
    if "prototype_probs" in dbg and protos:
        pr = dbg["prototype_probs"][i].float()
        top = pr.topk(min(3, pr.shape[-1]))
        out["top_prototypes"] = [
            [f"{protos[j].skill} {list(protos[j].enum)}", float(v)]
            for j, v in zip(top.indices.tolist(), top.values.tolist(), strict=True)
        ]
    return out


@dataclass
class EvalResult:
    metrics: EvalMetrics
    records: list[EpisodeRecord]
    traces: list[dict[str, Any]] = field(default_factory=list)
    attribution: dict[str, Any] = field(default_factory=dict)
    after_failure: list[bool] = field(default_factory=list)
    correction: dict[str, Any] = field(default_factory=dict)  # CorrectionSplit.to_dict() of the CU ablation


def validation_env_config(env_config: AgentTaskEnvConfig, fault_share: float) -> AgentTaskEnvConfig:
    """The training env config on the validation split, with a fixed share ``fault_share`` of faulty episodes
    (no curriculum), as every evaluation of a run uses it."""
    faults = env_config.faults.model_copy(
        update={"enabled": fault_share > 0, "start_share": fault_share, "end_share": fault_share}
    )
    return env_config.model_copy(update={"faults": faults, "split": "validation"})


def cu_env_config(validation: AgentTaskEnvConfig, caller_error_share: float) -> AgentTaskEnvConfig:
    """The validation env of the CU ablation: the run's validation env with ``caller_error_share`` of its
    episodes carrying an injected caller error."""
    faults = validation.faults.model_copy(update={"caller_error_share": caller_error_share})
    return validation.model_copy(update={"faults": faults})


def validation_tasks(env_config: AgentTaskEnvConfig, tasks_per_family: int) -> list[tuple[str, int]]:
    """``(family, task seed)`` of every validation task (the domain's fixed validation seeds)."""
    d = get_domain(env_config.domain)
    return [(f, s) for f in env_config.family_list() for s in d.validation_seeds(f, tasks_per_family)]


def rollout(
    policy: Policy,
    env_config: AgentTaskEnvConfig | dict[str, Any],
    tasks: list[tuple[str, int]],
    *,
    num_envs: int = 16,
    max_traces: int = 0,
    max_failed_traces: int = 0,
    trace_meta: dict[str, Any] | None = None,
    reward_layers: Sequence[RewardLayer] = (),
    on_episode: Callable[[], None] | None = None,
) -> tuple[list[EpisodeRecord], list[dict[str, Any]]]:
    """Run each ``(family, task_seed)`` once; returns episode records (task order) and the kept traces.

    Args:
        policy: chooses the actions.
        env_config: the validation env.
        tasks: ``(family, task_seed)`` pairs.
        num_envs: envs stepped in lockstep.
        max_traces: episodes traced as a sample, taken across families in turn (see :func:`select_traces`).
        max_failed_traces: every episode that did not complete is traced too, up to this many.
        trace_meta: fields copied into every trace (stage, iteration).
        reward_layers: plain reward layers that score each kept trace's episode (``reward_layers`` per layer
            and per step).
        on_episode: called once per finished episode (progress).
    """
    cfg = (
        env_config
        if isinstance(env_config, AgentTaskEnvConfig)
        else AgentTaskEnvConfig.model_validate(env_config)
    )
    envs = [AgentTaskEnv(cfg) for _ in range(min(num_envs, len(tasks)))]
    records: list[EpisodeRecord | None] = [None] * len(tasks)
    tracing = max_traces > 0 or max_failed_traces > 0
    traces: dict[int, dict[str, Any]] = {}
    queue = list(range(len(tasks)))
    slot: list[int | None] = [None] * len(envs)
    obs: list[dict[str, np.ndarray] | None] = [None] * len(envs)

    def start(j: int) -> None:
        if not queue:
            slot[j] = None
            return
        t = queue.pop(0)
        fam, seed = tasks[t]
        o, _ = envs[j].reset(
            seed=zlib.crc32(f"{fam}:{seed}".encode()), options={"family": fam, "task_seed": seed}
        )
        slot[j], obs[j] = t, o
        if tracing:
            traces[t] = {
                **(trace_meta or {}),
                "episode_id": envs[j].episode_id,
                "task_family": fam,
                "task_seed": seed,
                "trace_id": envs[j].intent_id or envs[j].episode_id,
                "steps": [],
            }

    for j in range(len(envs)):
        start(j)
    while any(s is not None for s in slot):
        live = [j for j, s in enumerate(slot) if s is not None]
        acts, dbg = policy.act_batch([obs[j] for j in live], [envs[j] for j in live])  # type: ignore[misc]
        for j, a, d in zip(live, acts, dbg, strict=True):
            t = slot[j]
            assert t is not None
            seen = obs[j]  # the state the policy acted on: after the previous step
            o, _r, term, trunc, info = envs[j].step(a)
            obs[j] = o
            if t in traces:
                steps = traces[t]["steps"]
                probs = d.pop("reflection_probs", None)
                if steps and probs is not None and steps[-1]["result_code"] != "OK":
                    # The reflection head reads the state after a failed step: its prediction is about that step.
                    steps[-1]["reflection"] = _reflection(probs, seen)
                steps.append(_trace_step(len(steps), info[STEP_TRACE], d))
            if term or trunc:
                rec = EpisodeRecord.from_dict(info[EPISODE_RECORD])
                records[t] = rec
                if t in traces:
                    traces[t]["completed"] = rec.completed
                if on_episode is not None:
                    on_episode()
                start(j)
    for e in envs:
        e.close()
    done = [r for r in records if r is not None]
    kept = select_traces(tasks, done, max_traces, max_failed_traces) if tracing else {}
    out = []
    for t, why in kept.items():
        tr = traces[t]
        tr["kept_as"] = why
        tr["failed"] = not done[t].completed
        if reward_layers:
            tr.update(score_trace_layers(done[t], reward_layers))
        out.append(tr)
    return done, out


def select_traces(
    tasks: Sequence[tuple[str, int]], records: Sequence[EpisodeRecord], max_sampled: int, max_failed: int
) -> dict[int, list[str]]:
    """Which episodes keep their trace: ``{task index: reasons}`` in task order.

    A sample of ``max_sampled`` episodes taken across families in turn (the first task of each family, then the
    second, ...), so every family is seen; and every episode that did not complete, up to ``max_failed`` (also
    across families in turn when the cap bites). Reasons are ``"sample"`` and/or ``"failed"``.
    """

    def round_robin(idx: list[int]) -> list[int]:
        by_family: dict[str, list[int]] = {}
        for i in idx:
            by_family.setdefault(tasks[i][0], []).append(i)
        return [i for row in itertools.zip_longest(*by_family.values()) for i in row if i is not None]

    kept: dict[int, list[str]] = {}
    for i in round_robin(list(range(len(records))))[:max_sampled]:
        kept.setdefault(i, []).append("sample")
    failed = [i for i, r in enumerate(records) if not r.completed]
    for i in round_robin(failed)[:max_failed]:
        kept.setdefault(i, []).append("failed")
    return dict(sorted(kept.items()))


def _trace_step(t: int, st: dict[str, Any], debug: dict[str, Any]) -> dict[str, Any]:
    """One traced step: what the gateway did (the env's step trace) and what the policy saw (``debug``)."""
    return {
        "t": t,
        "skill": st["skill"],
        "args": st["args"],
        "result_code": st["result_code"],
        "latency_ms": st["latency_ms"],
        "attempts": st.get("attempts"),
        "fallback_used": st.get("fallback_used"),
        "message": st.get("message", ""),
        "warnings": st.get("warnings") or [],
        "injected": bool(st.get("injected", False)),
        "masked": bool(st.get("masked", False)),
        "goals_satisfied": st.get("goals_satisfied") or [],
        "step_trace_id": st["trace_id"],
        "mask_reasons": st.get("mask_reasons") or {},
        **debug,
    }


def _reflection(probs: Sequence[float], obs_after: dict[str, np.ndarray] | None) -> dict[str, Any]:
    """The reflection head's predicted root cause of a failed step, with the rule-based cause for comparison."""
    cause = ROOT_CAUSES[int(np.argmax(probs))]
    hyp, exp = HYPOTHESES.get(cause, (None, None))
    rule = None
    if obs_after is not None and "reflection" in obs_after and float(np.sum(obs_after["reflection"])) > 0:
        rule = ROOT_CAUSES[int(np.argmax(obs_after["reflection"]))]
    return {
        "root_cause": cause,
        "probs": {c: float(p) for c, p in zip(ROOT_CAUSES, probs, strict=True)},
        "rule_based_cause": rule,
        "hypothesis": hyp,
        "minimal_experiment": exp,
    }


def correction_ablation(
    policy: ModulePolicy,
    env_config: AgentTaskEnvConfig,
    tasks_per_family: int,
    *,
    min_pairs: int = 0,
    max_tasks_per_family: int = 200,
    num_envs: int = 16,
    on_episode: Callable[[], None] | None = None,
) -> CorrectionSplit:
    """CU and the evidence uplift over paired first failures (:mod:`agentic_ray.eval.correction`): every validation
    task rolled three times, with the diagnosis, with the failure evidence but the diagnosis withheld, and with
    neither; more validation tasks are added (up to ``max_tasks_per_family`` per family) until both comparisons
    have ``min_pairs`` pairs."""
    conditions = (
        policy,
        ModulePolicy(policy.module, policy.deterministic, reflection=False),
        ModulePolicy(policy.module, policy.deterministic, reflection=False, evidence=False),
    )
    recs: tuple[list[EpisodeRecord], ...] = ([], [], [])
    done: set[tuple[str, int]] = set()
    n = tasks_per_family
    while True:
        tasks = [t for t in validation_tasks(env_config, n) if t not in done]
        for pol, out in zip(conditions, recs, strict=True):
            out += rollout(pol, env_config, tasks, num_envs=num_envs, on_episode=on_episode)[0]
        done |= set(tasks)
        cu_pairs, cu_dropped = correction_pairs(recs[0], recs[1])
        ev_pairs, ev_dropped = correction_pairs(recs[1], recs[2])
        fewest = min(len(cu_pairs), len(ev_pairs))
        if fewest >= min_pairs or n >= max_tasks_per_family:
            cfg = getattr(policy.module, "aaac_config", None)
            return CorrectionSplit(
                correction_uplift_paired(cu_pairs, cu_dropped),
                correction_uplift_paired(ev_pairs, ev_dropped),
                bool(getattr(cfg, "evidence_to_policy", False)),
            )
        per_task = max(fewest, 1) / n
        n = min(max_tasks_per_family, max(n + 1, int(np.ceil(1.2 * min_pairs / per_task))))


def evaluate_policy(
    policy: Policy,
    env_config: AgentTaskEnvConfig | dict[str, Any],
    tasks_per_family: int = 5,
    *,
    cu_ablation: bool = False,
    cu_env: AgentTaskEnvConfig | None = None,
    cu_min_pairs: int = 0,
    max_traces: int = 0,
    max_failed_traces: int = 0,
    trace_meta: dict[str, Any] | None = None,
    reward_layers: Sequence[RewardLayer] = (),
    num_envs: int = 16,
    on_episode: Callable[[], None] | None = None,
) -> EvalResult:
    """Metrics on the validation split; with ``cu_ablation`` the CU ablation (:func:`correction_ablation`) on
    ``cu_env`` (default: the same env), collecting at least ``cu_min_pairs`` first-failure pairs.

    Traces: see :func:`rollout` (``max_traces`` sampled across families, plus every failed episode up to
    ``max_failed_traces``, each scored by ``reward_layers``). ``on_episode`` is called per finished episode of
    every pass.
    """
    cfg = (
        env_config
        if isinstance(env_config, AgentTaskEnvConfig)
        else AgentTaskEnvConfig.model_validate(env_config)
    )
    tasks = validation_tasks(cfg, tasks_per_family)
    recs, traces = rollout(
        policy,
        cfg,
        tasks,
        num_envs=num_envs,
        max_traces=max_traces,
        max_failed_traces=max_failed_traces,
        trace_meta=trace_meta,
        reward_layers=reward_layers,
        on_episode=on_episode,
    )
    after = first_action_after_failure(recs, first_only=True)
    cu: CorrectionSplit | None = None
    if cu_ablation and isinstance(policy, ModulePolicy):
        cu = correction_ablation(
            policy,
            cu_env or cfg,
            tasks_per_family,
            min_pairs=cu_min_pairs,
            num_envs=num_envs,
            on_episode=on_episode,
        )
    correction = cu.to_dict() if cu is not None else {}
    metrics = evaluate(recs, cu=None if cu is None else cu.cu, evidence=None if cu is None else cu.evidence)
    return EvalResult(metrics, recs, traces, attribute_failures(recs), after, correction)
