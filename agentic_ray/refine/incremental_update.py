"""The trigger's incremental update: train the served policy on the dominant failure class, in reflection mode,
with only its last layers trainable; validate it through the pipeline's gates; register it as the canary.

* **Source**: the policy the Serve app serves as stable (the ``stable`` checkpoint of ``serve_config``), else the
  run's most advanced stage checkpoint.
* **Samples**: the kept windows of the episodes whose root cause is the dominant class (at most
  ``train_samples``): the observation at the pivot, the fix as the target, the hard negatives.
* **Last layers**, per part of the action: the parameterised layers (leaf modules with parameters) that the
  action loss (fix and hard negatives) reaches are listed in the module's order, once for the whole action and
  once for the skill choice alone; the last ``trainable_layers`` of each list train, the rest are frozen. A layer
  the action loss does not reach, such as a value or the reflection head registered after the policy head,
  would otherwise count as "last" and the policy would not move; and the whole action's last layers are the
  argument heads (on ``benchmarks/refine.py``: ``argument_context.3`` and ``enum_head``), so without the skill
  choice's own last layers an update could never change which skill is called, the decision a skipped
  prerequisite needs. The root-cause term trains those layers only where it reaches them.
* **Loss**, in reflection mode (the diagnosis input on): the fix's negative log-likelihood, a pairwise term
  ``softplus(log π(negative) - log π(fix))`` per hard negative (weight ``hard_negative_coeff``), the
  reflection head's root-cause cross-entropy (``reflection_coeff``), as the reflection stage trains it, and the
  optional (off by default) trust region ``anchor_kl_coeff · KL(π_served ‖ π)`` averaged over the served episodes' states but the
  training pivots (:func:`anchor_states`): trained on the failure class's few windows alone, the update moved
  the served policy's other decisions too (on the serve test's loop it lost 61 and won 5 of 480 tasks of the
  canary's traffic; see ``RefineConfig.anchor_kl_coeff``).
* **Gates**, the pipeline's on the fixed validation tasks: the run's ``stages.keep_better`` test (the candidate's
  completion not worse than the served policy's beyond the noise: exact one-sided McNemar at
  ``stages.regression_alpha``, :func:`~agentic_ray.stages.stage_guard.compare_completion`) and the RL gate
  (``dvr_progress >= stages.rl.gate_dvr``). The paired test sees only what the tasks show: an update that lost
  10 and won none of 100 validation tasks (p = 0.001) lost 1 of 10 (p = 0.5) and passed there.
* **Registration**: a candidate that passes is saved under ``RUN_DIR/refine/candidates/<n>`` (an RLModule
  checkpoint the Serve app loads) and registered (:mod:`agentic_ray.refine.candidate_registry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentic_ray.eval.evaluator import EvalResult, ModulePolicy, evaluate_policy, validation_env_config
from agentic_ray.eval.metrics import dvr_progress
from agentic_ray.eval.policy_loading import load_policy_module, pick_checkpoint
from agentic_ray.parser.goal_parser import torch_threads
from agentic_ray.refine.incremental_dataset import WindowSample
from agentic_ray.refine.refine_config import RefineConfig
from agentic_ray.settings import ExperimentSettings
from agentic_ray.stages.stage_guard import compare_completion, completion_by_task

__all__ = ["Anchor", "anchor_states", "last_layers", "run_update", "train_update", "validate"]


@dataclass
class Anchor:
    """The trust region's states (a stacked observation batch) and the served policy's action distribution
    there, computed once before the update."""

    batch: dict[str, torch.Tensor]
    served: Any


def anchor_states(episodes: Sequence[Any], samples: Sequence[WindowSample]) -> list[dict[str, np.ndarray]]:
    """The observations of the served ``episodes`` (:class:`~agentic_ray.refine.served_episodes.ServedEpisode`)
    at every step but the pivots of ``samples``, where the update is meant to move the policy."""
    pivots = {(s.episode_id, s.pivot) for s in samples}
    return [o for ep in episodes for t, o in enumerate(ep.obs) if (ep.session_id, t) not in pivots]


def _batch(module: Any, obs: Sequence[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    from agentic_ray.eval.evaluator import stack_obs

    return stack_obs(list(obs), next(module.parameters()).device)


def _skill_choice_loss(module: Any, samples: Sequence[WindowSample]) -> torch.Tensor:
    """The fix's skill's negative log-likelihood under the skill logits alone (arguments left out)."""
    from ray.rllib.core.columns import Columns

    batch = _batch(module, [s.obs for s in samples])
    out = module.forward_train({Columns.OBS: batch})
    dist = module.get_train_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
    fix = torch.as_tensor([int(s.fix["skill"]) for s in samples], device=dist.parts.skill.device)
    return torch.nn.functional.cross_entropy(dist.parts.skill, fix)


def _reached(module: Any, loss: torch.Tensor) -> list[str]:
    """Leaf layers with parameters that ``loss``'s gradient reaches, in the module's order."""
    module.zero_grad(set_to_none=True)
    loss.backward()
    reached = [
        name
        for name, m in module.named_modules()
        if not list(m.children())
        and any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in m.parameters(recurse=False))
    ]
    module.zero_grad(set_to_none=True)
    return reached


def _loss(
    module: Any,
    samples: Sequence[WindowSample],
    cfg: RefineConfig,
    reflection: bool = True,
    anchor: Anchor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The update's loss on ``samples`` (see the module docstring) and its parts (``reflection=False``: without
    the root-cause term; ``anchor``: with the trust region to the served policy on its states)."""
    from ray.rllib.core.columns import Columns

    from agentic_ray.models.aaac_rl_module import REFLECTION_EMBEDDINGS
    from agentic_ray.models.reflection import reflection_loss
    from agentic_ray.stages.imitation import stack_actions

    device = next(module.parameters()).device
    batch = _batch(module, [s.obs for s in samples])
    out = module.forward_train({Columns.OBS: batch})
    dist = module.get_train_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
    logp_fix = dist.logp(stack_actions([s.fix for s in samples], device))
    fix_nll = -logp_fix.mean()
    rows = [i for i, s in enumerate(samples) for _ in s.negatives]
    neg_term = torch.zeros((), device=device)
    if rows:
        idx = torch.as_tensor(rows, device=device)
        neg_logits = out[Columns.ACTION_DIST_INPUTS][idx]
        neg_dist = module.get_train_action_dist_cls().from_logits(neg_logits)
        logp_neg = neg_dist.logp(stack_actions([a for s in samples for a, _v in s.negatives], device))
        neg_term = torch.nn.functional.softplus(logp_neg - logp_fix[idx]).mean()
    refl = torch.zeros((), device=device)
    if reflection and cfg.reflection_coeff > 0 and hasattr(module, "compute_reflection_logits"):
        refl, _ = reflection_loss(module, batch, embeddings=out.get(REFLECTION_EMBEDDINGS))
    anchor_kl = torch.zeros((), device=device)
    if anchor is not None:
        logits = module.forward_train({Columns.OBS: anchor.batch})[Columns.ACTION_DIST_INPUTS]
        anchor_kl = anchor.served.kl(module.get_train_action_dist_cls().from_logits(logits)).mean()
    loss = (
        fix_nll
        + cfg.hard_negative_coeff * neg_term
        + cfg.reflection_coeff * refl
        + cfg.anchor_kl_coeff * anchor_kl
    )
    parts = {
        "fix_nll": float(fix_nll.detach()),
        "hard_negative": float(neg_term.detach()),
        "reflection": float(refl.detach()),
        "anchor_kl": float(anchor_kl.detach()),
    }
    return loss, parts


def last_layers(module: Any, samples: Sequence[WindowSample], cfg: RefineConfig, n: int) -> list[str]:
    """Names of the last ``n`` parameterised layers (leaf modules with parameters) that the update's action loss
    (the fix and the hard negatives) reaches, and of the last ``n`` that the skill choice alone reaches, in the
    module's order (see the module docstring)."""
    whole = _reached(module, _loss(module, samples, cfg, reflection=False)[0])[-n:]
    structured = all(isinstance(s.fix, dict) and "skill" in s.fix for s in samples)  # not a prototype index
    skill = _reached(module, _skill_choice_loss(module, samples))[-n:] if structured else []
    order = [name for name, _m in module.named_modules()]
    return sorted(set(whole) | set(skill), key=order.index)


def train_update(
    module: Any,
    samples: Sequence[WindowSample],
    cfg: RefineConfig,
    anchors: Sequence[dict[str, np.ndarray]] = (),
) -> dict[str, Any]:
    """Train ``module`` in place on ``samples`` in reflection mode, only its last ``cfg.trainable_layers``
    layers trainable, held near its own action distribution on the ``anchors`` states (``cfg.anchor_kl_coeff``;
    none: no trust region). Returns the trained layers and the loss per epoch."""
    with torch_threads(cfg.torch_threads):
        return _train_update(module, samples, cfg, anchors)


def _train_update(
    module: Any, samples: Sequence[WindowSample], cfg: RefineConfig, anchors: Sequence[dict[str, np.ndarray]]
) -> dict[str, Any]:
    from ray.rllib.core.columns import Columns

    torch.manual_seed(cfg.seed)
    if hasattr(module, "reflection_enabled"):
        module.reflection_enabled = True
    module.train()
    anchor = None
    if anchors and cfg.anchor_kl_coeff > 0:
        batch = _batch(module, anchors)
        with torch.no_grad():
            logits = module.forward_train({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS]
        anchor = Anchor(batch, module.get_train_action_dist_cls().from_logits(logits))
    names = set(last_layers(module, samples, cfg, cfg.trainable_layers))
    params = [p for name, m in module.named_modules() if name in names for p in m.parameters(recurse=False)]
    saved = {id(p): p.requires_grad for p in module.parameters()}
    for p in module.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=cfg.lr)
    history = []
    try:
        for _ in range(cfg.epochs):
            loss, parts = _loss(module, samples, cfg, anchor=anchor)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            history.append({"loss": float(loss.detach()), **parts})
    finally:
        for p in module.parameters():
            p.requires_grad_(saved[id(p)])
        module.eval()
    return {
        "trained_layers": sorted(names),
        "history": history,
        "samples": len(samples),
        "anchor_states": len(anchors) if anchor is not None else 0,
    }


def validate(base: EvalResult, cand: EvalResult, settings: ExperimentSettings) -> tuple[bool, dict[str, Any]]:
    """The pipeline's gates on the candidate's validation (see the module docstring)."""
    cmp = compare_completion(
        completion_by_task(base.records), completion_by_task(cand.records), settings.stages.regression_alpha
    )
    dvr = dvr_progress(cand.records)
    gates = {
        "completion": {**cmp.to_dict(), "passed": not cmp.worse},
        "dvr": {
            "value": dvr,
            "threshold": settings.stages.rl.gate_dvr,
            "passed": dvr >= settings.stages.rl.gate_dvr,
        },
    }
    return all(g["passed"] for g in gates.values()), gates


def _cause_share(res: EvalResult, cause: str) -> float:
    n = len(res.records)
    return res.attribution.get("root_causes", {}).get(cause, 0) / n if n else 0.0


def run_update(
    run: Path,
    settings: ExperimentSettings,
    samples: Sequence[WindowSample],
    cause: str,
    cfg: RefineConfig,
    episodes: Sequence[Any] = (),
) -> dict[str, Any]:
    """The trigger's update for the dominant ``cause`` (see the module docstring), its trust region on the
    states of the served ``episodes``; returns what it did."""
    from agentic_ray.refine.candidate_registry import register_candidate, served_checkpoint

    chosen = [s for s in samples if s.cause == cause][: cfg.train_samples]
    out: dict[str, Any] = {"cause": cause, "samples": len(chosen), "promoted_to_candidate": False}
    if not chosen:
        out["reason"] = "no kept window of the dominant class"
        return out
    source = served_checkpoint(cfg.serve_config) or pick_checkpoint(run)
    module = load_policy_module(source)
    val_env = validation_env_config(settings.env, settings.eval.fault_share)
    tasks = cfg.tasks_per_family or settings.eval.tasks_per_family
    base = evaluate_policy(ModulePolicy(module), val_env, tasks)
    out["train"] = train_update(module, chosen, cfg, anchor_states(episodes, chosen))
    cand = evaluate_policy(ModulePolicy(module), val_env, tasks)
    passed, gates = validate(base, cand, settings)
    out.update(
        source=str(source),
        gates=gates,
        passed=passed,
        validation_completion_before=base.metrics.completion,
        validation_completion_after=cand.metrics.completion,
        cause_share_before=_cause_share(base, cause),
        cause_share_after=_cause_share(cand, cause),
    )
    if passed:
        cands = run / "refine" / "candidates"
        dest = cands / str(len(list(cands.glob("*"))) if cands.exists() else 0)
        dest.parent.mkdir(parents=True, exist_ok=True)
        module.save_to_path(str(dest))
        out["checkpoint"] = str(dest)
        out["registered"] = register_candidate(
            run, dest, cfg.serve_config, version=f"refine-{dest.name}-{cause}"
        )
        out["promoted_to_candidate"] = True
    return out
