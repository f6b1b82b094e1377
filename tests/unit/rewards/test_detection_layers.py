"""The detection and ranking reward layers on hand-built records: which step gets which value, and why."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.keys import CONTEXT_DETECTION_CALLS, CONTEXT_RANKING_CALLS
from agentic_ray.rewards.call_outcomes import DetectionOutcome, RankingOutcome, align
from agentic_ray.rewards.layers import (
    LAYER_CLASSES,
    DetectionF1Layer,
    DetectionQualityLayer,
    LocalisationIoULayer,
    RankingNDCGLayer,
)
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig

from .records import record, step

TRUE = [[10.0, 10.0, 20.0, 20.0], [30.0, 30.0, 40.0, 44.0]]


def _det(key: str, t: float, pred: list[list[float]], true: list[list[float]] = TRUE) -> dict:
    return DetectionOutcome(
        skill="detect",
        args={"part_id": key, "t": t},
        key=key,
        pred_boxes=pred,
        pred_classes=[0] * len(pred),
        pred_scores=[0.9] * len(pred),
        true_boxes=true,
        true_classes=[0] * len(true),
    ).to_context()


def _rec(steps, detections=(), rankings=()):
    return record(
        steps,
        context={CONTEXT_DETECTION_CALLS: list(detections), CONTEXT_RANKING_CALLS: list(rankings)},
    )


def test_f1_lands_on_the_detect_steps_as_potential_differences() -> None:
    half = [TRUE[0]]  # one of two cracks found: F1 = 2/3
    steps = [
        step(skill="line.list"),
        step(skill="detect", args={"part_id": "a", "t": 0.5}),
        step("TOOL_TIMEOUT", skill="detect", args={"part_id": "a", "t": 0.3}),  # failed: no outcome, no value
        step(skill="detect", args={"part_id": "a", "t": 0.3}),
        step(skill="detect", args={"part_id": "a", "t": 0.3}),  # the same call again earns nothing
        step(skill="detect", args={"part_id": "b", "t": 0.5}),
    ]
    dets = [_det("a", 0.5, half), _det("a", 0.3, TRUE), _det("a", 0.3, TRUE), _det("b", 0.5, [], [])]
    v = DetectionF1Layer().score(_rec(steps, dets))
    np.testing.assert_allclose(v, [0, 2 / 3, 0, 1 / 3, 0, 1.0], atol=1e-6)
    assert v[:5].sum() == pytest.approx(1.0)  # the episode's sum per part is the last call's F1


def test_iou_scores_localisation_and_skips_parts_with_nothing_to_find() -> None:
    shifted = [[12.0, 10.0, 22.0, 20.0], [30.0, 30.0, 40.0, 44.0]]  # IoU 8/12 and 1
    steps = [
        step(skill="detect", args={"part_id": "a", "t": 0.5}),
        step(skill="detect", args={"part_id": "b", "t": 0.5}),
    ]
    v = LocalisationIoULayer().score(
        _rec(steps, [_det("a", 0.5, shifted), _det("b", 0.5, [[0, 0, 5, 5]], [])])
    )
    np.testing.assert_allclose(v, [(8 / 12 + 1.0) / 2, 0.0], atol=1e-6)


def test_ndcg_scores_the_ranking_step() -> None:
    rel = {"a": 0.9, "b": 0.5, "c": 0.0, "d": 0.2}
    ranking = RankingOutcome("rank", {"ids": ["a", "b", "c", "d"]}, "ranking", ["b", "a"], rel).to_context()
    steps = [step(skill="detect"), step(skill="rank", args={"ids": ["a", "b", "c", "d"]})]
    v = RankingNDCGLayer().score(_rec(steps, rankings=[ranking]))
    ideal = 0.9 + 0.5 / np.log2(3)
    assert v[0] == 0.0 and v[1] == pytest.approx((0.5 + 0.9 / np.log2(3)) / ideal)


def test_a_record_without_calls_scores_zero_everywhere() -> None:
    steps = [step(), step()]
    for layer in (DetectionF1Layer(), LocalisationIoULayer(), RankingNDCGLayer()):
        assert not layer.score(record(steps)).any()


def test_alignment_pairs_steps_with_outcomes_by_skill_and_arguments_in_order() -> None:
    steps = [
        step(skill="detect", args={"part_id": "b", "t": 0.5}),
        step(skill="detect", args={"part_id": "a", "t": 0.5}),
    ]
    out = [DetectionOutcome.from_context(_det(k, 0.5, [])) for k in ("a", "b")]
    assert [(t, o.key) for t, o in align(_rec(steps), out)] == [(0, "b"), (1, "a")]


def test_layers_are_off_by_default_and_declare_what_they_read() -> None:
    cfg = RewardPoolConfig()
    for name in ("detection_f1", "localisation_iou", "ranking_ndcg", "detection_quality"):
        assert name not in cfg.enabled_layers()
        assert LAYER_CLASSES[name].context_inputs  # type: ignore[attr-defined]
    assert LAYER_CLASSES["detection_quality"].needs_step_args


def test_quality_layer_scores_with_the_model_the_outcome_names() -> None:
    from agentic_ray.domains.inspection import tasks, tools

    world, _task = tasks.generate_task("mixed_batch", 3)
    pid = next(p.id for p in world.parts if p.spec.severity > 0)
    r = world.rendered(pid)
    truth = r.boxes[r.classes == 0].tolist()
    args = {
        "part_id": pid,
        "confidence_threshold": 0.5,
        "iou_threshold": 0.5,
        "max_detections": 5,
        "class_filter": "all",
    }
    tools.detect(world, args)
    good = dict(
        world.detection_calls[-1],
        pred_boxes=truth,
        pred_classes=[0] * len(truth),
        pred_scores=[0.9] * len(truth),
    )
    empty = dict(good, pred_boxes=[], pred_classes=[], pred_scores=[])
    layer = DetectionQualityLayer()
    assert layer.scorer_version == "1/none"
    recs = [_rec([step(skill="detect", args=args)], [d]) for d in (good, empty)]
    v_good, v_empty = layer.score_batch(recs)
    assert (
        0.0 <= v_empty[0] < v_good[0] <= 1.0
    )  # the exact boxes score above reporting nothing on a cracked part
    assert layer.scorer_version.startswith("1/1@") and len(layer.scorer_version) == len("1/1@") + 12
    np.testing.assert_allclose(layer.score(recs[0]), v_good)


def _with_defaults(d: dict, pred: list[list[float]]) -> dict:
    return dict(d, default_boxes=pred, default_classes=[0] * len(pred), default_scores=[0.9] * len(pred))


def test_baseline_default_pays_the_improvement_over_the_default_arguments() -> None:
    """From the defaults' F1, not from 0: a part the defaults already get right earns nothing for being detected,
    and parameters worse than the defaults cost what they lose."""
    half = [TRUE[0]]  # F1 2/3
    steps = [
        step(skill="detect", args={"part_id": "a", "t": 0.3}),
        step(skill="detect", args={"part_id": "a", "t": 0.5}),
        step(skill="detect", args={"part_id": "b", "t": 0.5}),
    ]
    dets = [
        _with_defaults(_det("a", 0.3, TRUE), half),  # better than the defaults: +1/3
        _with_defaults(_det("a", 0.5, half), half),  # back to the defaults' F1: -1/3
        _with_defaults(_det("b", 0.5, half), TRUE),  # worse than the defaults: -1/3
    ]
    v = DetectionF1Layer(baseline="default").score(_rec(steps, dets))
    np.testing.assert_allclose(v, [1 / 3, -1 / 3, -1 / 3], atol=1e-6)
    np.testing.assert_allclose(DetectionF1Layer().score(_rec(steps, dets)), [1.0, -1 / 3, 2 / 3], atol=1e-6)
    iou = LocalisationIoULayer(baseline="default").score(_rec(steps, dets))
    np.testing.assert_allclose(iou, [0.5, -0.5, -0.5], atol=1e-6)  # mean IoU over two cracks: 1 vs 1/2
    assert DetectionF1Layer(baseline="default").scorer_version == "1/baseline=default"
    assert DetectionF1Layer().scorer_version == "1"


def test_baseline_default_needs_the_default_reports_and_a_layer_that_has_them() -> None:
    steps = [step(skill="detect", args={"part_id": "a", "t": 0.5})]
    with pytest.raises(ValueError, match="no default-argument reports"):
        DetectionF1Layer(baseline="default").score(_rec(steps, [_det("a", 0.5, TRUE)]))
    with pytest.raises(ValueError, match="baseline must be 'none'"):
        RankingNDCGLayer(baseline="default")
    with pytest.raises(ValueError, match="baseline must be one of"):
        LocalisationIoULayer(baseline="zero")  # type: ignore[arg-type]


def test_a_detect_at_the_defaults_earns_nothing_under_baseline_default_and_better_reports_earn_more() -> None:
    """The inspection domain logs what the contract's defaults report on the same frame; the quality layer scores
    those in the same forward pass."""
    from agentic_ray.domains.inspection import detector, tasks, tools

    world, _task = tasks.generate_task("mixed_batch", 3)
    pid = next(p.id for p in world.parts if p.spec.severity > 0)
    args = {"part_id": pid, **detector.DEFAULT_PARAMS}
    tools.detect(world, args)
    at_defaults = world.detection_calls[-1]
    assert at_defaults["default_boxes"] == at_defaults["pred_boxes"]
    assert at_defaults["default_boxes"]  # the defaults find this part's crack: the check above can fail
    tools.detect(world, {**args, "class_filter": "scratch"})  # other parameters: the defaults' reports stay
    assert world.detection_calls[-1]["pred_boxes"] == []
    assert world.detection_calls[-1]["default_boxes"] == at_defaults["default_boxes"]
    rec = _rec([step(skill="detect", args=args)], [at_defaults])
    layers = (DetectionF1Layer, LocalisationIoULayer, DetectionQualityLayer)
    for cls in layers:
        assert cls(baseline="default").score(rec)[0] == pytest.approx(0.0, abs=1e-6)
        assert cls().score(rec)[0] > 0  # from 0, the same call earns the part's whole score
    missed = dict(
        at_defaults, pred_boxes=[], pred_classes=[], pred_scores=[]
    )  # parameters that report nothing
    layer = DetectionQualityLayer(baseline="default")
    v_missed = layer.score(_rec([step(skill="detect", args=args)], [missed]))[0]
    assert v_missed < 0
    assert v_missed == pytest.approx(
        DetectionQualityLayer().score(_rec([step(skill="detect", args=args)], [missed]))[0]
        - DetectionQualityLayer().score(rec)[0],
        abs=1e-6,
    )
    assert layer.scorer_version.endswith("/baseline=default")
