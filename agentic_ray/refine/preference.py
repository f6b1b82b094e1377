"""Preference learning for the model-based scorer: a pairwise Bradley–Terry fit on feedback pairs, against a scalar
regression on the same noisy labels (issue 31; seed 002's scalar reward model overfit annotator noise).

The scorer is the shape of L5's model (:mod:`~agentic_ray.rewards.ltv_model`): a linear score
``((x - mean) / scale) · coef`` of an episode's :data:`~agentic_ray.rewards.ltv_model.FEATURES`.

* :func:`fit_bradley_terry`: ``coef`` maximising ``Σ log σ(s(better) - s(worse))`` over the pairs (a logistic
  regression without intercept on the feature differences, both orders), L2-regularised.
* :func:`fit_scalar`: ``coef`` of a least-squares (ridge) regression of every trajectory's scalar label.
* :func:`pair_accuracy`: the share of pairs a scorer orders as the truth does.
* :func:`annotated_pairs`: pairs of trajectories of the same task (same customer, their own process features,
  drawn by :func:`~agentic_ray.rewards.ltv_model.simulate`), each pair rated by one annotator: a rating is the
  annotator's own offset plus their own scale times the true utility (L5's ground-truth logit) plus noise. The
  pairwise label is the annotator's order of the two; the scalar labels are the two ratings themselves.
* :func:`feedback_pairs`: the pairs the Serve store's feedback gives: two served episodes of the same task, one
  with success feedback and one with failure feedback.
* :func:`preference_model`: L5's model refitted on such pairs with Bradley–Terry, in the shipped model's file
  format, so that ``rewards.layers.long_term_value.params.model_path`` loads it. ``refine`` writes it when a pass
  reads enough pairs (``RefineConfig.preference_min_pairs``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentic_ray.rewards import ltv_model
from agentic_ray.rewards.episode_record import EpisodeRecord

__all__ = [
    "AnnotatedPairs",
    "annotated_pairs",
    "feedback_pairs",
    "fit_bradley_terry",
    "fit_scalar",
    "pair_accuracy",
    "preference_model",
]

CONTEXT_COLUMNS = [ltv_model.FEATURES.index(f) for f in ltv_model.CONTEXT_FEATURES]


@dataclass
class AnnotatedPairs:
    """``a[i]`` and ``b[i]``: the features of two trajectories of one task; ``rating_a`` / ``rating_b``: one
    annotator's noisy scalar ratings of them; ``truth``: 1.0 where ``a`` is truly better."""

    a: np.ndarray
    b: np.ndarray
    rating_a: np.ndarray
    rating_b: np.ndarray
    truth: np.ndarray

    def preferred(self) -> tuple[np.ndarray, np.ndarray]:
        """The (better, worse) features by the annotators' order (the noisy pairwise labels)."""
        a_wins = self.rating_a >= self.rating_b
        return np.where(a_wins[:, None], self.a, self.b), np.where(a_wins[:, None], self.b, self.a)


def true_utility(x: np.ndarray) -> np.ndarray:
    """L5's ground-truth logit of the simulated population (the clean label)."""
    return ltv_model._TRUE_INTERCEPT + x @ ltv_model._TRUE_COEF


def annotated_pairs(
    n: int,
    seed: int,
    annotators: int = 10,
    offset_sd: float = 2.0,
    scale_range: tuple[float, float] = (0.3, 3.0),
    noise_sd: float = 0.5,
) -> AnnotatedPairs:
    """``n`` pairs of trajectories of the same task rated by ``annotators`` noisy annotators (see the module
    docstring); each annotator has an offset drawn with ``offset_sd`` and a scale drawn in ``scale_range``."""
    rng = np.random.default_rng(seed)
    x, _y = ltv_model.simulate(2 * n, seed)
    a, b = x[:n].copy(), x[n:].copy()
    b[:, CONTEXT_COLUMNS] = a[:, CONTEXT_COLUMNS]  # the same task: the same customer
    who = rng.integers(0, annotators, n)
    offset = rng.normal(0.0, offset_sd, annotators)[who]
    scale = rng.uniform(*scale_range, annotators)[who]
    ua, ub = true_utility(a), true_utility(b)
    ra = offset + scale * ua + rng.normal(0.0, noise_sd, n)
    rb = offset + scale * ub + rng.normal(0.0, noise_sd, n)
    return AnnotatedPairs(a, b, ra, rb, (ua > ub).astype(np.float64))


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(0), x.std(0) + 1e-8


def fit_bradley_terry(better: np.ndarray, worse: np.ndarray, c: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Bradley–Terry: ``(scale, coef)`` with ``P(better ≻ worse) = σ((better - worse) / scale · coef)``."""
    from sklearn.linear_model import LogisticRegression

    _m, scale = _standardise(np.vstack([better, worse]))
    d = (better - worse) / scale
    clf = LogisticRegression(C=c, fit_intercept=False, max_iter=1000)
    clf.fit(np.vstack([d, -d]), np.r_[np.ones(len(d)), np.zeros(len(d))])
    return scale, clf.coef_[0]


def fit_scalar(x: np.ndarray, y: np.ndarray, alpha: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A scalar reward model: ``(scale, coef)`` of a ridge regression of the labels ``y`` on ``x``."""
    from sklearn.linear_model import Ridge

    mean, scale = _standardise(x)
    return scale, Ridge(alpha=alpha).fit((x - mean) / scale, y).coef_


def pair_accuracy(
    fit: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray, truth: np.ndarray
) -> float:
    """The share of pairs the scorer ``fit`` orders as ``truth`` (1.0: ``a`` better) does (a tie counts half)."""
    scale, coef = fit
    d = ((a - b) / scale) @ coef
    return float(np.mean(np.where(d == 0, 0.5, (d > 0) == (truth > 0.5))))


def compare(train: AnnotatedPairs, test: AnnotatedPairs) -> dict[str, float]:
    """Both scorers fitted on ``train``'s noisy labels and measured on ``test``'s clean order."""
    bt = fit_bradley_terry(*train.preferred())
    sc = fit_scalar(np.vstack([train.a, train.b]), np.r_[train.rating_a, train.rating_b])
    return {
        "pairwise": pair_accuracy(bt, test.a, test.b, test.truth),
        "scalar": pair_accuracy(sc, test.a, test.b, test.truth),
    }


def feedback_pairs(episodes: Sequence[Any]) -> list[tuple[EpisodeRecord, EpisodeRecord]]:
    """(better, worse) records of served episodes of the same task (family and seed): one with success feedback,
    the other with failure feedback (``episodes``: :class:`~agentic_ray.refine.served_episodes.ServedEpisode`)."""
    by_task: dict[tuple[str, int], dict[str, list[EpisodeRecord]]] = defaultdict(lambda: defaultdict(list))
    for ep in episodes:
        outcomes = {f.outcome for f in ep.feedback}
        if ep.record is None or len(outcomes) != 1:
            continue  # no replay, or contradicting feedback
        by_task[(ep.family, ep.seed)][outcomes.pop()].append(ep.record)
    return [(g, b) for o in by_task.values() for g in o["success"] for b in o["failure"]]


def preference_model(
    pairs: Sequence[tuple[EpisodeRecord, EpisodeRecord]], c: float = 1.0, base: Any = None
) -> dict[str, Any]:
    """L5's model with the process features' weights fitted by Bradley–Terry on ``(better, worse)`` episode pairs,
    as a model file (the shipped one's format: :meth:`~agentic_ray.rewards.ltv_model.LTVModel.load`).

    The two episodes of a pair are one task of one customer, so the customer columns (``CONTEXT_FEATURES``) do not
    differ within a pair and pairs cannot identify their weights; those, the intercept and the base rate stay the
    shipped model's (``base``). A feature that never differs within a pair keeps the shipped weight too. Under a
    logistic process the pairwise log-odds have the scale of the outcome's log-odds, so the two sets of weights
    are in one unit.
    """
    base = base or ltv_model.LTVModel.load()
    better = np.stack([ltv_model.episode_features(g) for g, _b in pairs])
    worse = np.stack([ltv_model.episode_features(b) for _g, b in pairs])
    spread = np.abs(better - worse).max(0)
    fitted = [i for i in range(len(ltv_model.FEATURES)) if i not in CONTEXT_COLUMNS and spread[i] > 0]
    scale, coef = fit_bradley_terry(better[:, fitted], worse[:, fitted], c)
    all_scale, all_coef = base.scale.astype(float).copy(), base.coef.astype(float).copy()
    all_scale[fitted], all_coef[fitted] = scale, coef
    return {
        "version": f"ltv-bt-{len(pairs)}pairs",
        "features": list(ltv_model.FEATURES),
        "mean": base.mean.tolist(),
        "scale": all_scale.tolist(),
        "coef": all_coef.tolist(),
        "intercept": base.intercept,
        "base_rate": base.base_rate,
        "train": {
            "method": "bradley_terry",
            "pairs": len(pairs),
            "fitted_features": [ltv_model.FEATURES[i] for i in fitted],
            "base_model": f"{base.version}@{base.digest}",
        },
    }
