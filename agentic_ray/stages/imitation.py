"""Stage 1, imitation: behaviour cloning of the scripted expert on an RLlib module, in plain torch.

Cross-entropy on the skill, pointers and enums and Gaussian NLL on the numeric parameters are exactly the
negative log-likelihood of the expert action under the module's own action distribution, so the loss is
``-(w · log π(a_expert | s)).sum() / w.sum()``, with ``w = 0`` on the injected wrong steps of controlled wrong
samples (they are labelled for reflection, never imitated). Only the arguments the expert's skill uses enter
``log π`` (the distribution's contract).

Why plain torch rather than an RLlib BC learner: the demonstrations are generated in-process and never touch
Ray Data, and the same module object is then handed to the RL stage (its weights are pushed to the learner
group and synced to the EnvRunners), so there is one model, not two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from agentic_ray.eval.evaluator import stack_obs
from agentic_ray.graph_spec import EVIDENCE_FLAGS
from agentic_ray.stages.demos import Demo, collect_demos

FAILED = EVIDENCE_FLAGS.index("failed")


def stack_actions(actions: list[Any], device: torch.device) -> Any:
    """Env actions → the batched form the module's distribution takes (dict of tensors, or a tensor)."""
    if isinstance(actions[0], dict):
        return {
            k: torch.as_tensor(np.stack([np.asarray(a[k]) for a in actions])).to(device) for k in actions[0]
        }
    return torch.as_tensor(np.asarray(actions, dtype=np.int64)).to(device)


def bc_dataset(
    demos: list[Demo], correction_weight: float = 1.0
) -> tuple[list[dict[str, np.ndarray]], list[Any], np.ndarray]:
    """Observations, actions and per-step weights; an imitated step taken right after a failed one (its
    observation's ``failure_evidence`` says the last step failed: the correction) weighs ``correction_weight``."""
    obs = [o for d in demos for o in d.obs]
    acts = [a for d in demos for a in d.actions]
    w = np.asarray([x for d in demos for x in d.weights], dtype=np.float32)
    if correction_weight != 1.0:
        after_failure = np.asarray([float(o["failure_evidence"][FAILED]) > 0 for o in obs])
        w = np.where(after_failure & (w > 0), w * correction_weight, w).astype(np.float32)
    return obs, acts, w


def behaviour_cloning(
    module: Any,
    demos: list[Demo],
    *,
    epochs: int = 8,
    minibatch_size: int = 256,
    lr: float = 1e-3,
    freeze_encoder: bool = False,
    reflection_coeff: float = 0.0,
    reflection_dropout: float = 0.0,
    correction_weight: float = 1.0,
    seed: int = 0,
    evidence_dropout: float = 0.0,
    on_epoch: Callable[[float], None] | None = None,
    max_minibatches: int | None = None,
) -> dict[str, Any]:
    """Train ``module`` (an AAAC RLModule) on the demonstrations in place.

    With ``reflection_coeff > 0`` the reflection head also learns, by cross-entropy, the root cause the env
    attributed to the previous step on every step that follows a failure (the wrong samples provide those), so
    the policy's predicted-cause input is meaningful from the first RL iteration on.

    With ``reflection_dropout > 0`` that share of the rows, drawn afresh each minibatch, imitate with the
    diagnosis withheld (the failure evidence kept): the same policy learns what to do with the diagnosis and
    without it, so Correction Uplift's "off" is the best policy the demonstrations teach from the evidence alone,
    not an input it never saw. ``evidence_dropout`` withholds the evidence and the diagnosis on another share (the
    evidence uplift's "off").

    ``correction_weight`` weighs the imitated steps right after a failure (see :func:`bc_dataset`): they are few
    (one or two per wrong sample) and they are what the reflection input is for.

    ``on_epoch(nll)`` is called after each epoch with its mean weighted NLL (progress).

    ``max_minibatches`` caps the minibatches of each epoch (the RL stage's decaying BC term takes a few).

    Returns:
        ``{"nll": [mean weighted NLL per epoch], "samples": imitated steps}``.
    """
    from ray.rllib.core.columns import Columns

    obs, acts, w = bc_dataset(demos, correction_weight)
    device = next(module.parameters()).device
    model = module.model
    frozen = list(model.encoder.parameters()) if freeze_encoder else []
    frozen_ids = {id(p) for p in frozen}
    params = [p for p in module.parameters() if p.requires_grad and id(p) not in frozen_ids]
    for p in frozen:
        p.requires_grad_(False)
    opt = torch.optim.Adam(params, lr=lr)
    dist_cls = module.get_train_action_dist_cls()
    rng = np.random.default_rng(seed)
    history = []
    module.train()
    try:
        for _ in range(epochs):
            order = rng.permutation(len(obs))
            tot, n = 0.0, 0.0
            starts = range(0, len(order), minibatch_size)
            for s in starts[:max_minibatches] if max_minibatches is not None else starts:
                idx = order[s : s + minibatch_size]
                wb = torch.as_tensor(w[idx], device=device)
                if float(wb.sum()) == 0.0:
                    continue
                batch = stack_obs([obs[i] for i in idx], device)
                out = module.forward_train(
                    {Columns.OBS: batch},
                    reflection_dropout=reflection_dropout,
                    evidence_dropout=evidence_dropout,
                )
                dist = dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS])
                logp = dist.logp(stack_actions([acts[i] for i in idx], device))
                loss = -(logp * wb).sum() / wb.sum()
                if reflection_coeff > 0 and hasattr(module, "compute_reflection_logits"):
                    from agentic_ray.models.aaac_rl_module import REFLECTION_EMBEDDINGS
                    from agentic_ray.models.reflection import reflection_loss

                    loss_r, _ = reflection_loss(module, batch, embeddings=out.get(REFLECTION_EMBEDDINGS))
                    loss = loss + reflection_coeff * loss_r
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                tot += float(loss.detach()) * float(wb.sum())
                n += float(wb.sum())
            history.append(tot / max(n, 1.0))
            if on_epoch is not None:
                on_epoch(history[-1])
    finally:
        for p in frozen:
            p.requires_grad_(True)
        module.eval()
    return {"nll": history, "samples": int(w.sum())}


def imitate_stage(
    module: Any, demos: list[Demo], il: Any, seed: int, on_epoch: Callable[[float], None] | None = None
) -> dict[str, Any]:
    """:func:`behaviour_cloning` with the imitation stage's settings (``il``: ``stages.il``, an
    :class:`~agentic_ray.settings.ImitationSettings`), so the pipeline, the benchmarks and the tests imitate alike.
    """
    return behaviour_cloning(
        module,
        demos,
        reflection_coeff=il.reflection_coeff,
        reflection_dropout=il.reflection_dropout,
        evidence_dropout=il.evidence_dropout,
        correction_weight=il.correction_weight,
        epochs=il.epochs,
        minibatch_size=il.minibatch_size,
        lr=il.lr,
        freeze_encoder=il.freeze_encoder,
        seed=seed,
        on_epoch=on_epoch,
    )


CORRECTION_DEMO_SEED = 7919
"""Offset of the correction demonstrations' seed from the run's (imitation's use seed + attempt)."""


def imitate_corrections(
    module: Any,
    settings: Any,
    demos: list[Demo],
    *,
    on_demo: Callable[[], None] | None = None,
    on_epoch: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """The reflection stage's imitation of corrected failures (``stages.reflection.correction_demos``).

    The scripted expert's wrong-sample episodes only (seed 000's controlled wrong samples: every one fails once, on
    an injected caller error, a garbled reply or a reversed step, and is corrected according to its root cause),
    mixed with imitation's ``demos``, imitated with the reflection input on, zeroed on
    ``stages.reflection.reflection_dropout`` of the rows (so the blind policy stays the best one the data
    teaches), corrected steps weighted ``stages.reflection.correction_weight``, and the root-cause cross-entropy,
    at ``stages.reflection.correction_lr`` (None: imitation's ``stages.il.lr``).

    Args:
        module: an AAAC RLModule (trained in place).
        settings: the run's :class:`~agentic_ray.settings.ExperimentSettings`.
        demos: imitation's demonstrations.

    Returns:
        :func:`behaviour_cloning`'s stats plus ``correction_kinds`` (demonstrations per kind).
    """
    il, rf = settings.stages.il, settings.stages.reflection
    corrections = collect_demos(
        settings.env,
        rf.correction_demos,
        1.0,
        seed=settings.seed + CORRECTION_DEMO_SEED,
        on_demo=on_demo,
        caller_errors=il.caller_error_kinds,
    )
    stats = behaviour_cloning(
        module,
        [*demos, *corrections],
        reflection_coeff=rf.reflection_coeff,
        reflection_dropout=rf.reflection_dropout,
        evidence_dropout=rf.evidence_dropout,
        correction_weight=rf.correction_weight,
        epochs=rf.correction_epochs,
        minibatch_size=il.minibatch_size,
        lr=il.lr if rf.correction_lr is None else rf.correction_lr,
        seed=settings.seed,
        on_epoch=on_epoch,
        freeze_encoder=rf.freeze_encoder,
    )
    return {**stats, "correction_kinds": dict(Counter(d.kind for d in corrections))}
