"""``benchmarks/aaac_vs_ppo.py`` reuses runs from ``--runs`` by its flags; a run made under other resolved settings
(a default changed in the code, not a flag) is counted as stale instead of passing silently."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.aaac_vs_ppo import parse, resolved_fingerprint, settings_key, stale_runs


def test_a_changed_default_changes_the_fingerprint_but_not_the_flags_key():
    base = parse([])
    # The fix prior is on by default; writing out the default changes the flags key but not the resolved settings.
    same = parse(["--set", "model.reflection_fix_prior=true"])
    other = parse(["--set", "model.reflection_fix_prior=false"])
    assert resolved_fingerprint("ppo", base) == resolved_fingerprint("ppo", same)
    assert resolved_fingerprint("ppo", base) != resolved_fingerprint("ppo", other)
    assert settings_key(base) != settings_key(same)


def test_the_fingerprint_ignores_which_seeds_run_and_tells_arms_apart():
    assert resolved_fingerprint("aaac", parse(["--seeds", "0"])) == resolved_fingerprint("aaac", parse([]))
    assert resolved_fingerprint("aaac", parse([])) != resolved_fingerprint("ppo", parse([]))


def test_stale_runs_counts_other_and_unrecorded_fingerprints():
    runs = [{"resolved": "abc"}, {"resolved": "xyz"}, {}]
    assert stale_runs(runs, "abc") == 2
    assert stale_runs(runs[:1], "abc") == 0


def test_the_default_flags_still_find_the_recorded_runs():
    # A flag added later (at its default) must not orphan the runs already in the results file.
    runs = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "aaac_vs_ppo_runs.jsonl"
    keys = {json.loads(line)["settings_key"] for line in runs.read_text().splitlines()}
    assert settings_key(parse([])) in keys
    assert settings_key(parse(["--init-demos", "25"])) not in keys


def test_the_domain_reaches_training_and_evaluation_and_names_the_variant():
    from benchmarks.aaac_vs_ppo import eval_env_config, settings_for, variant

    memory = parse(["--domain", "helpdesk_memory", "--setting", "imitation"])
    assert settings_for("aaac", 0, memory).env.domain == "helpdesk_memory"
    assert eval_env_config(memory).domain == "helpdesk_memory"
    assert resolved_fingerprint("aaac", memory) != resolved_fingerprint(
        "aaac", parse(["--setting", "imitation"])
    )
    assert variant(memory) == "imitation-helpdesk_memory"
    assert variant(parse(["--domain", "helpdesk_memory"])) == "helpdesk_memory"
    assert variant(parse(["--setting", "imitation"])) == "imitation"
    assert variant(parse([])) is None


def test_an_arm_only_flag_keeps_the_other_arms_runs():
    # PPO-Lagrangian rerun with a larger multiplier step: its own key changes, no other arm's does.
    base, step = (
        parse(["--setting", "imitation"]),
        parse(["--setting", "imitation", "--lagrangian-lr", "0.5"]),
    )
    assert settings_key(step, "ppo_lagrangian") != settings_key(base, "ppo_lagrangian")
    for arm in ("aaac", "ppo", "ppo_risk_folded", "aaac_no_kl"):
        assert settings_key(step, arm) == settings_key(base, arm) == settings_key(base)
    # A flag every arm shares still changes every key; an AAAC-only override leaves the PPO arms alone.
    wider = parse(["--setting", "imitation", "--batch", "256"])
    assert settings_key(wider, "ppo") != settings_key(base, "ppo")
    aaac_only = parse(["--setting", "imitation", "--aaac-set", "algo.training.beta_0=2.0"])
    assert settings_key(aaac_only, "ppo") == settings_key(base, "ppo")
    assert settings_key(aaac_only, "aaac") != settings_key(base, "aaac")
