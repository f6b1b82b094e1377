"""The two options that tell a nearly right deciding call from a wrong one (issue 30): the record-credit layer and
``ranking_ndcg``'s ``over: line``, on hand-built records and on a real inspection episode."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.keys import CONTEXT_RANKING_CALLS, CONTEXT_RECORD_CALLS
from agentic_ray.rewards.call_outcomes import RankingOutcome, RecordOutcome
from agentic_ray.rewards.layers import LAYER_CLASSES, RankingNDCGLayer, RecordCreditLayer
from agentic_ray.rewards.reward_pool_config import RewardPoolConfig

from .records import record, step

MUST = {"a": "crack", "b": "crack", "c": "crack"}
MUST_NOT = {"d": "crack", "e": "crack"}


def _out(ids: list[str], finding: str, table: dict[str, str]) -> dict:
    return RecordOutcome(
        "db_update", {"part_ids": ids, "finding": finding}, "findings", dict(table), MUST, MUST_NOT
    ).to_context()


def test_record_credit_pays_the_share_right_and_charges_the_wrong_ones() -> None:
    calls = [  # (arguments, the table after the call)
        (["a", "b"], "crack", {"a": "crack", "b": "crack"}),  # 2 of 3: 2/3
        (["d"], "crack", {"a": "crack", "b": "crack", "d": "crack"}),  # a forbidden crack: 1/3
        (["c"], "scratch", {"a": "crack", "b": "crack", "c": "scratch", "d": "crack"}),  # a wrong finding: 0
        (["c", "d"], "crack", {"a": "crack", "b": "crack", "c": "crack", "d": "crack"}),  # 2/3
        (["d"], "clean", {"a": "crack", "b": "crack", "c": "crack", "d": "clean"}),  # the judgement passes: 1
    ]
    steps = [step(skill="line.list")] + [
        step(skill="db_update", args={"part_ids": i, "finding": f}) for i, f, _ in calls
    ]
    rec = record(steps, context={CONTEXT_RECORD_CALLS: [_out(*c) for c in calls]})
    v = RecordCreditLayer().score(rec)
    np.testing.assert_allclose(v, [0, 2 / 3, -1 / 3, -1 / 3, 2 / 3, 1 / 3], atol=1e-6)
    assert v.sum() == pytest.approx(1.0)  # the final table's credit
    assert not RecordCreditLayer().score(record([step(), step()])).any()


def test_record_credit_is_nan_with_nothing_required_and_the_layer_is_off_by_default() -> None:
    assert np.isnan(RecordOutcome("db_update", {}, "findings", {"a": "crack"}, {}).credit())
    assert "record_credit" not in RewardPoolConfig().enabled_layers()
    assert LAYER_CLASSES["record_credit"].context_inputs == (CONTEXT_RECORD_CALLS,)


def test_ndcg_over_the_line_scores_a_subset_ranking_below_one() -> None:
    line = {"a": 0.9, "b": 0.5, "c": 0.0, "d": 0.7}
    sub = {k: line[k] for k in ("a", "b", "c")}  # the call left out d, the second most severe
    args = {"ids": ["a", "b", "c"]}
    ranking = RankingOutcome("rank", args, "ranking", ["a", "b"], sub, line).to_context()
    rec = record([step(skill="rank", args=args)], context={CONTEXT_RANKING_CALLS: [ranking]})
    assert RankingNDCGLayer().score(rec)[0] == pytest.approx(1.0)
    ideal = 0.9 + 0.7 / np.log2(3)
    assert RankingNDCGLayer(over="line").score(rec)[0] == pytest.approx((0.9 + 0.5 / np.log2(3)) / ideal)
    assert RankingNDCGLayer(over="line").scorer_version == "1/over=line"
    assert RankingNDCGLayer().scorer_version == "1"


def test_ndcg_over_the_line_needs_the_line_and_a_known_option() -> None:
    args = {"ids": ["a", "b"]}
    ranking = RankingOutcome("rank", args, "ranking", ["a"], {"a": 1.0, "b": 0.0}).to_context()
    rec = record([step(skill="rank", args=args)], context={CONTEXT_RANKING_CALLS: [ranking]})
    with pytest.raises(ValueError, match="no line_relevance"):
        RankingNDCGLayer(over="line").score(rec)
    with pytest.raises(ValueError, match="over must be"):
        RankingNDCGLayer(over="all")  # type: ignore[arg-type]


def test_the_inspection_domain_logs_what_both_options_read() -> None:
    """A real top_cracks episode: a subset ranking, a partial record, then the expert's calls."""
    from agentic_ray.domains.inspection import InspectionDomain, detector, tasks, tools

    world, task = tasks.generate_task("top_cracks", 3)
    ids = [p.id for p in world.parts]
    must = task.extra[tasks.MUST]
    for pid in ids:
        tools.detect(world, {"part_id": pid, **detector.DEFAULT_PARAMS})
    top = sorted(world.parts, key=lambda p: -p.spec.severity)
    k = len(must)
    subset = [p.id for p in top[1:]]  # the most severe part left out
    tools.rank_topk(world, {"part_ids": subset, "k": str(k)})
    tools.db_update(world, {"part_ids": [next(iter(must))], "finding": "crack"})
    tools.db_update(world, {"part_ids": [top[-1].id], "finding": "crack"})  # a part that must not be a crack
    tools.db_update(world, {"part_ids": list(must), "finding": "crack"})
    tools.db_update(world, {"part_ids": [top[-1].id], "finding": "clean"})
    ctx = InspectionDomain().reward_context(world)
    ranking = RankingOutcome.from_context(ctx[CONTEXT_RANKING_CALLS][0])
    assert ranking.line_relevance == {p.id: p.spec.severity for p in world.parts}
    credits = [RecordOutcome.from_context(d).credit() for d in ctx[CONTEXT_RECORD_CALLS]]
    assert credits == pytest.approx([1 / k, 0.0, 1 - 1 / k, 1.0])
    assert tasks.final_check(world, task)
    world.close()
