"""Step 3 of the refiner: the trigger, the incremental update (reflection mode, last layers only), the
pipeline's gates on the validation tasks, and the registration as the Serve app's canary candidate."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from agentic_ray.eval.evaluator import EvalResult
from agentic_ray.eval.metrics import evaluate
from agentic_ray.eval.policy_loading import load_policy_module, pick_checkpoint
from agentic_ray.refine import RefineConfig, refine
from agentic_ray.refine.incremental_update import _skill_choice_loss, train_update, validate
from agentic_ray.serving.settings import ServeSettings
from agentic_ray.settings import load_settings
from tests.helpers.serving import TINY

REPO = Path(__file__).resolve().parents[3]
FAST = RefineConfig(max_alternatives=2, tasks_per_family=1, epochs=4, fix_memory=None)


def test_only_the_last_layers_train_and_the_fix_becomes_likelier(fresh_store, served_run) -> None:
    rep = refine(fresh_store, served_run, FAST, train=False)
    samples = [s for s in rep.samples if s.cause == rep.dominant_cause]
    module = load_policy_module(pick_checkpoint(served_run))
    before = {k: v.clone() for k, v in module.state_dict().items()}
    skill_nll_before = float(_skill_choice_loss(module, samples))
    stats = train_update(module, samples, FAST.model_copy(update={"epochs": 20}))
    layers = stats["trained_layers"]
    # the last two of the whole action's layers, and the last two of the skill choice's (the weakness here is a
    # wrong skill: the whole action's last layers alone are argument heads, which cannot change the skill)
    assert 2 <= len(layers) <= 4 and all(name.startswith("model.") for name in layers)
    assert float(_skill_choice_loss(module, samples)) < skill_nll_before - 0.05
    after = module.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(any(k.startswith(f"{name}.") for name in layers) for k in changed)
    nll = [h["fix_nll"] for h in stats["history"]]
    assert nll[-1] < nll[0]
    assert all(p.requires_grad for p in module.parameters())  # the freezing is undone


def test_an_update_can_change_the_skill_where_no_step_failed(tmp_path) -> None:
    """Without failure evidence the whole action's last layers are argument heads; the skill choice's own last
    layers must train too, or a skipped prerequisite (the wrong skill) can never be fixed."""
    from agentic_ray.envs.agent_task_env import AgentTaskEnv
    from agentic_ray.refine.incremental_dataset import build_dataset
    from agentic_ray.refine.rescoring import EpisodeRescorer, pool_config_for
    from agentic_ray.refine.served_episodes import read_served_episodes
    from tests.helpers import refine_store as R
    from tests.helpers.serving import save_untrained_module, validation_env
    from tests.unit.refine.conftest import WEAK_FAMILY

    cfg = validation_env()
    tasks = [(WEAK_FAMILY, 1000000000 + i) for i in range(3)]
    R.record_sessions(tmp_path / "serve.sqlite", cfg, tasks, R.hands_off_early(WEAK_FAMILY))
    env = AgentTaskEnv(cfg)
    r = EpisodeRescorer(pool_config_for(None, cfg.domain, None), tmp_path / "ledger.sqlite")
    samples, _ = build_dataset(read_served_episodes(tmp_path, cfg), env, r, FAST)
    env.close()
    r.close()
    module = load_policy_module(save_untrained_module(tmp_path / "policy", seed=2))
    nll = float(_skill_choice_loss(module, samples))
    train_update(module, samples, FAST.model_copy(update={"epochs": 20}))
    assert float(_skill_choice_loss(module, samples)) < nll - 0.05


def test_the_gates_reject_a_candidate_that_completes_less(served) -> None:
    _d, recorded = served
    records = [r for _s, r in recorded]
    s = load_settings(TINY)
    good = EvalResult(evaluate(records), records)
    broken = [r.__class__(**{**r.__dict__, "completed": False}) for r in records]
    worse = EvalResult(evaluate(broken), broken)
    ok, gates = validate(good, good, s)
    assert ok and gates["completion"]["passed"]
    s.stages.regression_alpha = 0.5  # two paired tasks lost of four: worse only at a loose level
    bad, gates = validate(good, worse, s)
    assert not bad and gates["completion"]["worse"] and gates["completion"]["only_before"] == 2


def test_past_the_trigger_a_validated_update_becomes_the_canary_candidate(
    fresh_store, served_run, tmp_path
) -> None:
    from tests.helpers.serving import save_untrained_module

    # the app serves another policy than the run's most advanced checkpoint: the update starts from the served one
    served_policy = save_untrained_module(tmp_path / "served_policy", seed=3)
    doc = yaml.safe_load((REPO / "serve_apps" / "policy.yaml").read_text())
    doc["applications"][0]["args"]["stable"]["checkpoint"] = str(served_policy)
    serve_yaml = tmp_path / "policy.yaml"
    serve_yaml.write_text(yaml.safe_dump(doc, sort_keys=False))
    rep = refine(fresh_store, served_run, FAST.model_copy(update={"serve_config": str(serve_yaml)}))
    u = rep.update
    assert u is not None and u["cause"] == "wrong_entity" and u["samples"] == 4 and u["passed"]
    assert u["source"] == str(served_policy)
    assert u["promoted_to_candidate"] and Path(u["checkpoint"]).is_dir()
    app = yaml.safe_load(serve_yaml.read_text())["applications"][0]["args"]
    s = ServeSettings.model_validate(app)
    assert s.candidate is not None and s.candidate.checkpoint == u["checkpoint"]
    assert s.candidate.version == "refine-0-wrong_entity" and s.stable.checkpoint == str(served_policy)
    reg = json.loads((served_run / "refine" / "candidate.json").read_text())
    assert reg["checkpoint"] == u["checkpoint"] and reg["applications"] == ["policy"]
    cand = load_policy_module(u["checkpoint"])
    src = load_policy_module(served_policy).state_dict()
    diff = [k for k, v in cand.state_dict().items() if not torch.equal(v, src[k])]
    # the served policy itself is untouched; the candidate is its trained copy (only the last layers differ)
    assert diff and all(any(k.startswith(f"{n}.") for n in u["train"]["trained_layers"]) for k in diff)


def test_below_the_trigger_nothing_trains(fresh_store, served_run) -> None:
    rep = refine(fresh_store, served_run, FAST.model_copy(update={"trigger_share": 0.5}))
    assert rep.attribution["cause_shares"] == {"wrong_entity": 0.5}  # must exceed, not reach
    assert rep.dominant_cause is None and rep.update is None
    assert not (served_run / "refine" / "candidate.json").exists()


def test_an_update_that_fails_its_gates_is_not_registered(
    fresh_store, served_run, tmp_path, monkeypatch
) -> None:
    """The gates decide: a failed update leaves the Serve config, candidate.json and the candidates folder as
    they were (the canary never sees it)."""
    from agentic_ray.refine import incremental_update

    def worse(base, cand, settings):
        _ok, gates = validate(base, cand, settings)
        return False, {**gates, "completion": {**gates["completion"], "passed": False}}

    monkeypatch.setattr(incremental_update, "validate", worse)
    doc = yaml.safe_load((REPO / "serve_apps" / "policy.yaml").read_text())
    doc["applications"][0]["args"]["stable"]["checkpoint"] = str(pick_checkpoint(served_run))
    serve_yaml = tmp_path / "policy.yaml"
    serve_yaml.write_text(yaml.safe_dump(doc, sort_keys=False))
    before = serve_yaml.read_text()
    u = refine(fresh_store, served_run, FAST.model_copy(update={"serve_config": str(serve_yaml)})).update
    assert u is not None and u["train"]["samples"] == 4 and not u["passed"]
    assert not u["promoted_to_candidate"] and "checkpoint" not in u and "registered" not in u
    assert serve_yaml.read_text() == before
    assert not (served_run / "refine" / "candidate.json").exists()
    assert not (served_run / "refine" / "candidates").exists()


def test_the_trust_region_holds_the_served_policy_off_the_pivots(fresh_store, served_run) -> None:
    """With the anchor the update moves the served policy's action distribution on the served states it does not
    train on (every step but the pivots) several times less than without, and still makes the fix likelier."""
    from ray.rllib.core.columns import Columns

    from agentic_ray.refine.incremental_update import _batch, anchor_states
    from agentic_ray.refine.refiner import run_settings, served_env
    from agentic_ray.refine.served_episodes import read_served_episodes

    episodes = read_served_episodes(fresh_store, served_env(run_settings(served_run), FAST))
    rep = refine(fresh_store, served_run, FAST, train=False)
    samples = [s for s in rep.samples if s.cause == rep.dominant_cause]
    anchors = anchor_states(episodes, samples)
    pivots = {(s.episode_id, s.pivot) for s in samples}
    assert pivots and len(anchors) == sum(len(ep.obs) for ep in episodes) - len(pivots)

    def dist(module):
        with torch.no_grad():
            out = module.forward_train({Columns.OBS: _batch(module, anchors)})
        return module.get_train_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])

    moved, nll = {}, {}
    from tests.helpers.serving import LOOP_ANCHOR_KL as coeff_default  # the coefficient the Serve loop uses

    assert RefineConfig().anchor_kl_coeff == 0.0  # off by default
    for coeff in (0.0, coeff_default):
        module = load_policy_module(pick_checkpoint(served_run))
        served = dist(module)
        nll_before = float(_skill_choice_loss(module, samples).detach())
        cfg = FAST.model_copy(update={"epochs": 20, "anchor_kl_coeff": coeff})
        stats = train_update(module, samples, cfg, anchors)
        assert stats["anchor_states"] == (len(anchors) if coeff else 0)
        moved[coeff] = float(served.kl(dist(module)).mean())
        nll[coeff] = nll_before - float(_skill_choice_loss(module, samples).detach())
    print(f"KL to the served policy off the pivots: {moved}, the fix's skill NLL down by {nll}")
    assert moved[coeff_default] < moved[0.0] / 10, moved
    assert nll[coeff_default] > 0.02, nll
