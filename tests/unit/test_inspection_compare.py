"""``benchmarks/inspection.py --compare`` (issue 30): the sparse arm's reward is the task's outcome and nothing
before it, and episodes to target are read from a curve with runs that never reach it censored at the budget."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from agentic_ray.domains import get_domain
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.eval import bootstrap  # noqa: F401 (imported here: scipy's import is not the tests' time)
from agentic_ray.keys import EPISODE_RECORD
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layer_group_scorer import make_layers
from agentic_ray.rewards.normalization import RewardNormalizer
from agentic_ray.rewards.reward_vector import combine_layers
from agentic_ray.settings import ExperimentSettings  # noqa: F401 (the settings' imports, likewise)
from benchmarks.inspection_compare import CURVE, add_arguments, arm_line, ratio_line, settings_for, to_target


def _flags(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


@pytest.fixture(scope="module")
def expert_episode() -> EpisodeRecord:
    """One validation task of the inspection domain, solved by the scripted expert (detect, rank, record)."""
    env = AgentTaskEnv(AgentTaskEnvConfig(domain="inspection", split="validation", validation_per_family=1))
    expert = get_domain("inspection").expert()
    env.reset(seed=0)
    while True:
        _obs, _r, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
        if term or trunc:
            env.close()
            return EpisodeRecord.from_dict(info[EPISODE_RECORD])


def _reward_stream(run: str, record: EpisodeRecord) -> np.ndarray:
    """What the learner would train on for ``record`` under ``run``'s settings: every enabled layer scored and
    combined as the reward-aware EnvRunner combines them (weights, normalisation modes)."""
    cfg = settings_for(run, 0, _flags()).rewards
    layers = make_layers(cfg, judge_url=None)
    norm = RewardNormalizer({n: cfg.normalize_mode(n) for n in layers}, clip=cfg.normalize_clip)
    raw = {n: np.asarray(layer.score(record)) for n, layer in layers.items()}
    reward, _risk, _ = combine_layers(raw, norm, {n: cfg.weight(n) for n in layers}, record.num_steps)
    return reward


def test_the_sparse_arm_rewards_only_the_end_of_the_task(expert_episode: EpisodeRecord) -> None:
    assert expert_episode.completed and expert_episode.num_steps > 3
    sparse = _reward_stream("sparse", expert_episode)
    np.testing.assert_array_equal(sparse[:-1], 0.0)  # no call result, no detection score, no shaping
    assert sparse[-1] > 0
    # the same episode under the layered rewards is dense: the check above can fail
    assert np.count_nonzero(_reward_stream("config", expert_episode)[:-1]) >= 2


def test_the_arms_change_one_thing_each() -> None:
    a = _flags()
    config, sparse, flat = (settings_for(r, 0, a) for r in ("config", "sparse", "flat"))
    assert sparse.rewards.enabled_layers() == ["task_outcome"]
    assert config.rewards.enabled_layers() == flat.rewards.enabled_layers()
    assert {"detection_f1", "localisation_iou", "ranking_ndcg", "execution"} <= set(
        config.rewards.enabled_layers()
    )
    assert (config.model.modality_fusion, flat.model.modality_fusion, sparse.model.modality_fusion) == (
        "gated",
        "flat",
        "gated",
    )
    assert config.model_dump(exclude={"rewards"}) == sparse.model_dump(exclude={"rewards"})


def _run(seed: int, completions: list[float], episodes_per_eval: int = 100) -> dict:
    curve = [["il", 0, 0, completions[0], 0.7]]
    curve += [["rl", episodes_per_eval * i, 1000 * i, c, 0.7] for i, c in enumerate(completions[1:], 1)]
    return {
        "run": "x",
        "seed": seed,
        "curve": curve,
        "episodes": curve[-1][1],
        "env_steps": curve[-1][2],
        "env_steps_per_s": 20.0,
        "wall_s": 1.0,
        "modality_fusion": "gated",
        "reward_layers": [],
    }


def test_episodes_to_target_is_the_first_evaluation_at_the_target_and_the_budget_when_censored() -> None:
    assert CURVE.index("episodes") == 1 and CURVE.index("completion") == 3
    assert to_target(_run(0, [0.3, 0.5, 0.6, 0.55]), "completion", 0.6) == (200, True)
    assert to_target(_run(0, [0.6, 0.7]), "completion", 0.6) == (0, True)  # imitation already there
    assert to_target(_run(0, [0.3, 0.5, 0.59]), "completion", 0.6) == (200, False)  # censored at the budget
    run = _run(0, [0.3, 0.7])
    run["curve"][1][4] = None  # no part inspected: no F1, which reaches no target
    assert (
        to_target(run, "f1", 0.5) == (0, True)
        and to_target({**run, "curve": run["curve"][1:]}, "f1", 0.5)[1] is False
    )


def test_arm_lines_count_reached_runs_and_the_ratio_is_a_bound_under_censoring() -> None:
    a = _flags("--target", "0.6")
    fast = arm_line("reward", "layered", "config", [_run(s, [0.3, 0.7, 0.7]) for s in (0, 1, 2)], a)
    slow_runs = [_run(0, [0.3, 0.5, 0.6]), _run(1, [0.3, 0.5, 0.5]), _run(2, [0.3, 0.4, 0.6])]
    slow = arm_line("reward", "sparse", "sparse", slow_runs, a)
    assert (fast["reached"], fast["episodes_to_target"], fast["episodes_to_target_ci"]) == (
        3,
        100,
        [100, 100],
    )
    assert (slow["reached"], slow["episodes_to_target"], slow["runs"]) == (2, 200, 3)
    assert slow["final_completion"] == pytest.approx(0.5667, abs=1e-4) and slow["start_completion"] == 0.3
    r = ratio_line("reward", fast, slow)
    assert r["episodes_to_target_ratio"] == 2.0 and r["bound"] == "lower"
    assert r["censored"] == {"layered": 0, "sparse": 1}
    assert ratio_line("reward", slow, fast)["bound"] == "upper"


def test_env_steps_to_target_counts_steps_where_the_arms_episodes_differ_in_length() -> None:
    """From scratch (the seventh campaign) one arm's episodes were ~2 steps and the other's ~9: in episodes the arm
    that never reached the target is censored below the other's crossing, in env steps it is not."""
    a = _flags("--target", "0.2")
    short = [_run(s, [0.0, 0.0, 0.2, 0.2], episodes_per_eval=500) for s in (0, 1)]  # 1,000 env steps per eval
    long_ = [_run(s, [0.0, 0.0, 0.0, 0.0], episodes_per_eval=110) for s in (0, 1)]
    fast = arm_line("reward", "layered", "config", short, a)
    slow = arm_line("reward", "sparse", "sparse", long_, a)
    assert to_target(short[0], "completion", 0.2, unit="env_steps") == (2000, True)
    assert (fast["env_steps_to_target"], slow["env_steps_to_target"]) == (2000, 3000)
    assert [p["env_steps_to_target"] for p in fast["per_seed"]] == [2000, 2000]
    r = ratio_line("reward", fast, slow)
    assert r["episodes_to_target_ratio"] == pytest.approx(0.33, abs=0.01)  # 330 / 1,000 episodes
    assert r["env_steps_ratio"] == 1.5 and r["env_steps_ratio_ci"] == [1.5, 1.5] and r["bound"] == "lower"
