"""Steps 1 and 2 of the refiner: read what the Serve app stored, re-score it with the reward pool's code,
attribute failures with evaluation's rules, and build the incremental dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.eval.metrics import root_cause
from agentic_ray.refine import RefineConfig, refine
from agentic_ray.refine.attribution import attribute, dominant_cause
from agentic_ray.refine.incremental_dataset import build_dataset, window_starts
from agentic_ray.refine.rescoring import EpisodeRescorer, pool_config_for
from agentic_ray.refine.served_episodes import read_served_episodes
from agentic_ray.rewards.reward_ledger import SEALED
from tests.helpers.serving import validation_env
from tests.unit.refine.conftest import WEAK_FAMILY

SMALL = RefineConfig(max_alternatives=8)
FAST = RefineConfig(max_alternatives=2, fix_memory=None)


def test_stored_episodes_replay_to_the_records_the_app_saw(served) -> None:
    d, recorded = served
    eps = read_served_episodes(d, validation_env())
    assert [e.session_id for e in eps] == [s for s, _ in recorded]
    for e, (_s, rec) in zip(eps, recorded, strict=True):
        assert e.record is not None and len(e.obs) == rec.num_steps == len(e.actions)
        assert [s.result_code for s in e.record.steps] == [s.result_code for s in rec.steps]
        assert e.record.completed == rec.completed
        assert [f.outcome for f in e.feedback] == ["success" if rec.completed else "failure"]


def test_rescoring_seals_every_episode_in_the_ledger_and_ranks_failures_lower(served, tmp_path) -> None:
    _d, recorded = served
    cfg = validation_env()
    r = EpisodeRescorer(pool_config_for(None, cfg.domain, None), tmp_path / "ledger.sqlite")
    out = r.score(recorded)
    rows = dict(r.ledger.query("SELECT episode_id, status FROM episodes"))
    assert rows == {s: SEALED for s, _ in recorded}
    sealed = dict(r.ledger.query("SELECT episode_id, seal_checksum FROM episodes"))
    assert all(out[s].checksum == sealed[s] for s, _ in recorded)
    assert set(out[recorded[0][0]].layers) >= {"execution", "plan", "judge"}
    failed = [out[s].value for s, rec in recorded if not rec.completed]
    ok = [out[s].value for s, rec in recorded if rec.completed]
    assert failed and ok and max(failed) < min(ok)
    r.close()


def test_attribution_uses_evaluation_rules_and_the_trigger_finds_the_weak_class(served) -> None:
    _d, recorded = served
    att = attribute(dict(recorded))
    assert att["by_episode"] == {s: root_cause(rec) for s, rec in recorded}
    assert att["cause_shares"] == {"wrong_entity": 0.5}  # the weak family's two episodes of four
    assert dominant_cause(att["cause_shares"], 0.05) == "wrong_entity"
    assert dominant_cause(att["cause_shares"], 0.5) is None  # must exceed the share, not reach it
    assert dominant_cause({"a": 0.2, "b": 0.2}, 0.05) == "a"


def test_windows_of_five_every_three_steps() -> None:
    assert window_starts(12, 5, 3) == [0, 3, 6]
    assert window_starts(10, 5, 3) == [0, 3]
    assert window_starts(3, 5, 3) == [0]
    with pytest.raises(ValueError):
        RefineConfig(window=2, stride=3)


def test_counterfactual_hard_negatives_are_the_worst_alternatives_and_active_sampling_drops_the_rest(
    served, tmp_path
) -> None:
    d, recorded = served
    cfg = validation_env()
    eps = read_served_episodes(d, cfg)
    env = AgentTaskEnv(cfg)
    r = EpisodeRescorer(pool_config_for(None, cfg.domain, None), tmp_path / "ledger.sqlite")
    samples, stats = build_dataset(eps, env, r, SMALL)
    n_windows = sum(len(window_starts(rec.num_steps, 5, 3)) for _s, rec in recorded)
    assert stats.windows == n_windows and stats.kept + stats.dropped == n_windows
    weak = {s for s, rec in recorded if rec.task_family == WEAK_FAMILY}
    failed = [s for s in samples if s.failed]
    assert failed and {s.episode_id for s in failed} == weak  # the weak family's windows all hold a failure
    assert all(s.cause == "wrong_entity" for s in failed)
    for s in samples:
        # the worst alternatives the policy can choose first, then masked ones (zero probability, no pairwise term)
        keys = [(not bool(s.obs["skill_mask"][int(a["skill"])]), v) for a, v in s.negatives]
        assert len(keys) <= 3 and keys == sorted(keys) and all(v < s.fix_value for _m, v in keys)
        assert s.information >= SMALL.min_information or s.failed
    # every failed window has a negative the policy could have chosen (all of them were masked ones before)
    assert all(any(s.obs["skill_mask"][int(a["skill"])] for a, _v in s.negatives) for s in failed)
    assert (
        any(s.negatives for s in failed) and stats.dropped > 0
    )  # the expert-like windows carry no information
    assert all(
        len(set(v for _a, v in s.negatives)) > 1 for s in failed
    )  # the order is checked on distinct values
    assert stats.hard_negatives == sum(len(s.negatives) for s in samples)
    assert stats.hard_negative_share == pytest.approx(
        stats.hard_negatives / (stats.kept + stats.hard_negatives)
    )
    # with an unreachable information bar only the failed windows stay
    strict, st2 = build_dataset(eps, env, r, FAST.model_copy(update={"min_information": 1e9}))
    assert all(s.failed for s in strict) and st2.dropped == n_windows - len(strict) > 0
    assert st2.filtered_share == pytest.approx(st2.dropped / n_windows)
    env.close()
    r.close()


def test_a_failure_without_a_failed_step_pivots_where_the_policy_left_the_fix(tmp_path) -> None:
    from tests.helpers import refine_store as R

    cfg = validation_env()
    tasks = [(WEAK_FAMILY, 1000000000), (WEAK_FAMILY, 1000000001)]
    recorded = R.record_sessions(tmp_path / "serve.sqlite", cfg, tasks, R.hands_off_early(WEAK_FAMILY))
    assert all(not rec.completed and all(st.ok for st in rec.steps) for _s, rec in recorded)
    env = AgentTaskEnv(cfg)
    r = EpisodeRescorer(pool_config_for(None, cfg.domain, None), tmp_path / "ledger.sqlite")
    samples, _stats = build_dataset(read_served_episodes(tmp_path, cfg), env, r, SMALL)
    env.close()
    r.close()
    assert len(samples) == 2
    for s in samples:
        # the decision that lost the task (the handoff at step 1), not the first step where the policy did what
        # the fix does: that sample would teach nothing
        assert s.pivot == 1 and s.skill == "human.handoff" and s.fix_skill not in ("", "human.handoff")
        assert s.fix_value > s.value and not s.failed


def test_refine_reports_and_never_uses_a_window_twice(fresh_store, run_dir) -> None:
    rep = refine(fresh_store, run_dir, FAST, train=False)
    assert rep.episodes == 4 and rep.feedback == 4 and rep.dominant_cause == "wrong_entity"
    assert 0 <= rep.dataset["filtered_share"] <= 1 and rep.dataset["kept"] == len(rep.samples) > 0
    consumed = json.loads((run_dir / "refine" / "consumed.json").read_text())
    assert {s.window_id for s in rep.samples} <= set(consumed["windows"]) and len(consumed["feedback"]) == 4
    assert np.isfinite(list(rep.rescored.values())).all() and len(rep.rescored) == 4
    again = refine(fresh_store, run_dir, FAST, train=False)
    assert again.episodes == 0 and again.dataset["windows"] == 0
    assert (run_dir / "refine" / "report-1.json").is_file()


def test_the_cli_prints_the_report_and_names_a_wrong_path(fresh_store, run_dir, tmp_path) -> None:
    from tests.helpers.cli import invoke

    cfg = tmp_path / "refine.yaml"
    cfg.write_text("max_alternatives: 1\nfix_memory: null\n")
    r = invoke(
        ["refine", "--from", str(fresh_store), "--run", str(run_dir), "--config", str(cfg), "--no-train"]
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["episodes"] == 4 and rep["dominant_cause"] == "wrong_entity" and rep["update"] is None
    bad = invoke(["refine", "--from", str(tmp_path / "nowhere"), "--run", str(run_dir)])
    assert bad.exit_code == 2 and "no Serve store" in bad.stderr
