"""CU over paired first failures: a fix is the failed call succeeding within its cause's fix length."""

from __future__ import annotations

import pytest

from agentic_ray.eval.correction import correction_pairs, correction_uplift_paired, first_failure, fixed
from agentic_ray.rewards.episode_record import EpisodeRecord, StepRecord


def _step(skill: str, ok: bool, cause: str | None = None, redundant: bool = False) -> StepRecord:
    return StepRecord(skill, {}, "OK" if ok else "CONFLICT", ok, 1.0, root_cause=cause, redundant=redundant)


def _rec(*steps: StepRecord) -> EpisodeRecord:
    return EpisodeRecord("e", "d", "f", 0, list(steps), True, False, False, 3, [], [], [], True)


WRONG = _step("refund", False, "wrong_entity")
STALE = _step("refund", False, "stale_information")
BAD = _step("refund", False, "bad_parameters")
TOOL = _step("refund", False, "tool_error")
OK, READ, LIST = _step("refund", True), _step("read", True), _step("list", True)


def test_a_fix_is_cause_specific() -> None:
    """Hand-made records: each cause's own fix counts, the others' do not (see FIX_STEPS)."""
    # tool error: the same call at once; a lookup first wastes the step
    assert fixed(_rec(TOOL, OK), 0)
    assert not fixed(_rec(TOOL, READ, OK), 0)
    # wrong entity: the lookup that re-resolves the entity, then the call; a failed retry or two lookups are not
    assert fixed(_rec(READ, WRONG, LIST, OK), 1)
    assert not fixed(_rec(WRONG, WRONG, LIST, OK), 0)
    assert not fixed(_rec(WRONG, READ, LIST, OK), 0)
    # stale information: re-read then call is a fix, an immediate retry that fails is not
    assert fixed(_rec(STALE, READ, OK), 0)
    assert not fixed(_rec(STALE, STALE, READ, OK), 0)
    # bad parameters: the corrected call at once; a re-read first is not
    assert fixed(_rec(BAD, OK), 0)
    assert not fixed(_rec(BAD, READ, OK), 0)
    # the call succeeding without doing what it was for (redundant: no goal, nothing revealed) is no fix
    assert not fixed(_rec(BAD, _step("refund", True, redundant=True)), 0)
    assert first_failure(_rec(READ, STALE, READ)) == 1
    assert first_failure(_rec(READ, STALE)) is None  # no next step


def test_pairs_uplift_and_interval() -> None:
    on = [_rec(STALE, _step("read", True), _step("refund", True))] * 30 + [
        _rec(WRONG, _step("refund", True))
    ] * 10
    off = [_rec(STALE, STALE, _step("read", True))] * 30 + [_rec(WRONG, _step("refund", True))] * 10
    on.append(_rec(_step("read", True), _step("refund", True)))  # no failure in either run: no pair
    off.append(_rec(_step("read", True), _step("refund", True)))
    on.append(_rec(WRONG, _step("refund", True)))  # first failures differ: dropped
    off.append(_rec(_step("read", True), STALE, _step("read", True)))
    pairs, dropped = correction_pairs(on, off)
    assert len(pairs) == 40 and dropped == 1
    cu = correction_uplift_paired(pairs, dropped)
    assert cu.cu == pytest.approx(0.75) and cu.fix_rate_on == 1.0 and cu.fix_rate_off == pytest.approx(0.25)
    assert cu.ci is not None and cu.ci[0] < 0.75 < cu.ci[1] and cu.ci[0] > 0.5
    assert cu.by_cause["stale_information"] == {"pairs": 30.0, "fix_on": 1.0, "fix_off": 0.0}
    assert cu.to_dict()["cu_n"] == 40
    assert correction_uplift_paired([]).cu is None


def test_the_split_reports_cu_and_the_evidence_uplift_apart() -> None:
    """CU (diagnosis against the evidence alone) and the evidence uplift (the evidence against neither) each come
    with their own pairs and interval."""
    from agentic_ray.eval.correction import CorrectionSplit

    diagnosis = [(True, False, "stale_information")] * 20 + [(True, True, "tool_error")] * 20
    evidence = [(True, False, "tool_error")] * 10 + [(False, False, "stale_information")] * 30
    split = CorrectionSplit(correction_uplift_paired(diagnosis), correction_uplift_paired(evidence, 3))
    d = split.to_dict()
    assert d["cu"] == pytest.approx(0.5) and d["cu_n"] == 40
    assert d["evidence_uplift"] == pytest.approx(0.25) and d["evidence_uplift_n"] == 40
    assert d["evidence_uplift_pairs_dropped"] == 3 and d["evidence_channel"] is True
    assert d["evidence_uplift_ci"][0] <= 0.25 <= d["evidence_uplift_ci"][1]
