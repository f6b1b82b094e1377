"""The frozen long-term-value model behind L5: a 7-day repurchase proxy.

Seed 002's L5 is ``α·ΔCLV + β·ΔNPS`` through proxies computable within a minute (7-day repurchase uplift). We have
no shop data, so :func:`simulate` draws a seeded synthetic population of finished service episodes and their
7-day repurchase outcome from a known ground-truth logistic process, :func:`train` fits a logistic regression
(scikit-learn) on it, and the coefficients ship frozen as JSON in ``agentic_ray/data/``. Inference is plain numpy:
nothing is trained or downloaded at run time.

Regenerate the shipped file (deterministic for a given seed)::

    python -m agentic_ray.rewards.ltv_model --out agentic_ray/data/ltv_model_v1.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord

CONTEXT_FEATURES: tuple[str, ...] = ("customer_level", "customer_complaint_rate", "customer_verified")
"""The case facts the model reads from ``EpisodeRecord.context``, by the names of its own input vocabulary: the
customer's loyalty level (1 new .. 5), historical complaints per order in [0, 1], and 1.0 if the identity was
verified in the session. A domain that gives these (its ``reward_context``) gets L5; for any other domain the
layer is off (:func:`~agentic_ray.rewards.reward_pool_config.layers_for_context`), never fed zeros."""

FEATURES: tuple[str, ...] = (
    "completed",
    "failed",
    "excess_steps_ratio",
    "failure_fraction",
    "high_risk_count",
    *CONTEXT_FEATURES,
    "mean_latency_s",
    "redundant_fraction",
)
MODEL_VERSION = "ltv-logreg-v1"
DEFAULT_MODEL_FILE = "ltv_model_v1.json"

# Ground truth of the simulator (unknown to the model, which must recover it from samples).
_TRUE_INTERCEPT = -0.6
_TRUE_COEF = np.array([1.4, -1.2, -0.6, -1.0, -0.45, 0.25, -1.6, 0.3, -0.35, -0.8])


def episode_features(record: EpisodeRecord) -> np.ndarray:
    """The model's input for one episode, shape ``(len(FEATURES),)`` float64, ordered as :data:`FEATURES`.

    Raises:
        KeyError: the record's ``context`` lacks one of :data:`CONTEXT_FEATURES` (a domain that does not give
            them gets no L5 layer; nothing here stands in a default).
    """
    t = max(1, record.num_steps)
    opt = max(1, record.optimal_steps)
    fails = sum(1 for s in record.steps if not s.ok or s.masked)
    return np.array(
        [
            float(record.completed),
            float(record.failed),
            float(np.clip((record.num_steps - opt) / opt, 0.0, 3.0)),
            fails / t,
            float(sum(1 for s in record.steps if s.high_risk)),
            *(float(record.context[name]) for name in CONTEXT_FEATURES),
            float(np.mean([s.latency_ms for s in record.steps]) / 1000.0) if record.steps else 0.0,
            sum(1 for s in record.steps if s.redundant) / t,
        ]
    )


def simulate(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` synthetic episodes and their 7-day repurchase outcome.

    Returns:
        ``X`` of shape ``(n, len(FEATURES))`` and binary ``y`` of shape ``(n,)``.
    """
    rng = np.random.default_rng(seed)
    completed = rng.random(n) < 0.6
    failed = (~completed) & (rng.random(n) < 0.5)
    x = np.column_stack(
        [
            completed,
            failed,
            np.clip(rng.exponential(0.4, n), 0, 3),
            rng.beta(1.2, 6.0, n),
            rng.poisson(0.4, n),
            rng.integers(0, 6, n),
            rng.beta(1.5, 6.0, n),
            rng.random(n) < 0.7,
            rng.gamma(2.0, 0.25, n),
            rng.beta(1.0, 8.0, n),
        ]
    ).astype(np.float64)
    logit = _TRUE_INTERCEPT + x @ _TRUE_COEF
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return x, y


def train(n: int = 20000, seed: int = 7) -> dict:
    """Fit the logistic model on simulated data and return its JSON-ready description (with hold-out AUC)."""
    import sklearn
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    x, y = simulate(n, seed)
    n_train = int(0.8 * n)
    mean, scale = x[:n_train].mean(0), x[:n_train].std(0) + 1e-8
    clf = LogisticRegression(C=1.0, max_iter=1000)
    clf.fit((x[:n_train] - mean) / scale, y[:n_train])
    auc = roc_auc_score(y[n_train:], clf.predict_proba((x[n_train:] - mean) / scale)[:, 1])
    return {
        "version": MODEL_VERSION,
        "features": list(FEATURES),
        "mean": np.round(mean, 8).tolist(),
        "scale": np.round(scale, 8).tolist(),
        "coef": np.round(clf.coef_[0], 8).tolist(),
        "intercept": round(float(clf.intercept_[0]), 8),
        "base_rate": round(float(y[:n_train].mean()), 8),
        "train": {"n": n, "seed": seed, "holdout_auc": round(float(auc), 4), "sklearn": sklearn.__version__},
    }


@dataclass(frozen=True)
class LTVModel:
    """The frozen logistic model: ``p = σ(((x − mean)/scale)·coef + intercept)``."""

    version: str
    digest: str
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    base_rate: float

    @classmethod
    def load(cls, path: str | Path | None = None) -> LTVModel:
        """Load the shipped model (or one at ``path``). The digest is the first 12 hex digits of its SHA-256."""
        if path is None:
            text = resources.files("agentic_ray.data").joinpath(DEFAULT_MODEL_FILE).read_text()
        else:
            text = Path(path).read_text()
        d = json.loads(text)
        if tuple(d["features"]) != FEATURES:
            raise ValueError(f"model features {d['features']} do not match this code's {FEATURES}")
        return cls(
            version=d["version"],
            digest=hashlib.sha256(text.encode()).hexdigest()[:12],
            mean=np.asarray(d["mean"]),
            scale=np.asarray(d["scale"]),
            coef=np.asarray(d["coef"]),
            intercept=float(d["intercept"]),
            base_rate=float(d["base_rate"]),
        )

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Repurchase probability. ``x``: ``(N, F)`` → ``(N,)``."""
        z = ((x - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def uplift(self, records: Sequence[EpisodeRecord]) -> np.ndarray:
        """Predicted repurchase probability minus the population base rate, ``(N,)`` in [−1, 1]."""
        x = np.stack([episode_features(r) for r in records]) if records else np.zeros((0, len(FEATURES)))
        return self.predict_proba(x) - self.base_rate


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: train on simulated data and write the model JSON."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)
    model = train(a.n, a.seed)
    a.out.write_text(json.dumps(model, indent=1) + "\n")
    print(json.dumps({"out": str(a.out), **model["train"]}))


if __name__ == "__main__":
    main()
