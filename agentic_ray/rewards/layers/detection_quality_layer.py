"""Model-based detection quality (seed 000's model-based reward agent): a small frozen CNN scores each detection
call's reports from the image alone, with no ground truth.

The scorer is :class:`~agentic_ray.rewards.detection_quality_model.DetectionQualityModel`; which weights judge a
call is the domain's choice, named in each outcome (``DetectionOutcome.quality_model``, a ``package:path`` or file
path to the model's JSON record), or fixed for every call by the ``model`` parameter. Models are loaded once per
process and cached. CPU-bound, so it runs in the reward pool's CPU actors and scores a whole batch of episodes with
one forward pass; its scorer version names the model version and weights digest, so the ledger shows which model
scored. Values are potential differences per item (as the other detection layers); an episode without detection
calls scores 0 on every step. With ``baseline: default`` an item's potential starts at the quality of the reports
the skill's default arguments give on the same image (scored in the same forward pass; see
:mod:`~agentic_ray.rewards.layers.call_outcome_layer` for why).
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from agentic_ray.keys import CONTEXT_DETECTION_CALLS
from agentic_ray.rewards.call_outcomes import DetectionOutcome, align, detection_outcomes, potential_steps
from agentic_ray.rewards.detection_quality_model import DetectionQualityModel
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream
from agentic_ray.rewards.layers.call_outcome_layer import Baseline, check_baseline

_MODELS: dict[str, DetectionQualityModel] = {}


def resolve_model_path(ref: str) -> Path:
    """``package:relative/path`` (inside an installed package) or a plain file path."""
    pkg, sep, rel = ref.partition(":")
    if sep and pkg and "/" not in pkg and "\\" not in pkg:
        return Path(str(importlib.resources.files(pkg) / rel))
    return Path(ref)


def load_model(ref: str) -> DetectionQualityModel:
    """The model a reference names (loaded once per process)."""
    if ref not in _MODELS:
        _MODELS[ref] = DetectionQualityModel(resolve_model_path(ref))
    return _MODELS[ref]


class DetectionQualityLayer(RewardLayer):
    """Model-based detection quality, reward stream, step-level, scored in the reward pool's CPU actors.

    Args:
        model: the scorer for every call (``package:path`` or a path to its JSON record); None: the one each
            outcome names.
        baseline: where a part's potential starts: ``"none"`` (0) or ``"default"`` (the quality of the skill's
            default reports on the part's first call).
    """

    name = "detection_quality"
    version = "1"
    cost = CostClass.ASYNC_CPU
    stream = Stream.REWARD
    granularity = Granularity.STEP
    default_weight = 0.1
    enabled_by_default = False  # only domains that report detection calls feed it
    context_inputs = (CONTEXT_DETECTION_CALLS,)
    needs_step_args = True  # steps are paired with outcomes by their arguments

    def __init__(self, model: str | None = None, baseline: Baseline = "none") -> None:
        check_baseline(self.name, baseline)
        self.model = model
        self.baseline = baseline
        self._used: dict[str, DetectionQualityModel] = {}

    @property
    def scorer_version(self) -> str:
        models = ",".join(f"{m.version}@{m.digest}" for m in self._used.values()) or "none"
        base = "" if self.baseline == "none" else f"/baseline={self.baseline}"
        return f"{self.version}/{models}{base}"

    def _model_of(self, o: DetectionOutcome) -> DetectionQualityModel:
        ref = self.model or o.quality_model
        if not ref:
            raise ValueError(f"no quality model for the outcome of {o.skill} on {o.key}: configure `model`")
        m = self._used[ref] = load_model(ref)
        return m

    def score(self, record: EpisodeRecord) -> np.ndarray:
        return self.score_batch([record])[0]

    def score_batch(self, records: Sequence[EpisodeRecord]) -> list[np.ndarray]:
        """One forward pass per model over every call of every record."""
        calls = []  # (record index, step, outcome); step -1 - t: the defaults' reports of the call at step t
        firsts: list[dict[str, int]] = []  # per record: key -> the step of its first call
        for i, r in enumerate(records):
            first: dict[str, int] = {}
            for t, o in align(r, detection_outcomes(r) or []):
                calls.append((i, t, o))
                if self.baseline == "default" and o.key not in first:
                    first[o.key] = t
                    calls.append((i, -1 - t, o.at_defaults()))
            firsts.append(first)
        quality: dict[tuple[int, int], float] = {}
        by_model: dict[int, list[tuple[int, int, DetectionOutcome]]] = {}
        models: dict[int, DetectionQualityModel] = {}
        for c in calls:
            m = self._model_of(c[2])
            models[id(m)] = m
            by_model.setdefault(id(m), []).append(c)
        for mid, group in by_model.items():
            q = models[mid].score(
                np.stack([o.pixels() for _, _, o in group]),
                [np.asarray(o.pred_boxes, dtype=np.float32).reshape(-1, 4) for _, _, o in group],
                [np.asarray(o.pred_classes, dtype=np.int64) for _, _, o in group],
            )
            for (i, t, _), qv in zip(group, q, strict=True):
                quality[(i, t)] = float(qv)
        return [
            potential_steps(
                r.num_steps,
                [(t, o.key, quality[(i, t)]) for t, o in align(r, detection_outcomes(r) or [])],
                {key: quality[(i, -1 - t)] for key, t in firsts[i].items()},
            )
            for i, r in enumerate(records)
        ]
