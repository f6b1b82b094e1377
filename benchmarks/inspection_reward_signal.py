"""Does the layered reward of ``configs/inspection.yaml`` pay for completing the task? (issue 30); JSON lines.

The imitation start of ``benchmarks/inspection.py --compare reward`` (``--demos`` scripted-expert demonstrations at
the config's imitation settings, seed ``--seed``) samples ``--episodes`` training episodes (stochastic actions, as RL
samples them; the families in turn, faults as the config trains). Every episode is scored by the config's enabled
reward layers exactly as the reward pool scores it (each layer's values, online normalisation with the statistics
of this batch, weights: :func:`~agentic_ray.rewards.reward_vector.combine_layers`), and one line per reward
setting gives, for completed and failed episodes, each layer's mean raw sum (``raw_completed``, ``raw_failed``) and
weighted normalised sum (``completed``, ``failed``), each layer's correlation with completion (``corr``), the
return's (``return_corr``) and the return's correlation within each task family (``family_corr``: the family is
a confounder, its goal count sets how much a task can earn).

Two settings: ``config``, the layers as the config sets them, and ``plain``, the same layers with their
constructor options cleared (every layer at its defaults): what the config's options change. The reward options are
chosen by what they mean, not by this figure; it checks that the return pays for completion. Why it exists: the
layered arm of ``--compare reward`` barely raised completion while the sparse arm did, and this measures whether the
reward it learns from rewards completing the task at all. About a minute on one CPU (imitation ~30 s).

    python benchmarks/inspection_reward_signal.py [--episodes 200] [--demos 40] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported as benchmarks.<name>


def imitation_start(demos: int, seed: int) -> tuple[Any, Any]:
    """The settings and the imitated module of ``--compare``'s start: ``demos`` scripted-expert demonstrations at
    the config's imitation settings, seed ``seed``."""
    import torch
    from inspection_compare import CONFIG

    from agentic_ray.algorithms.build import module_spec
    from agentic_ray.envs.agent_task_env import AgentTaskEnv
    from agentic_ray.settings import load_settings
    from agentic_ray.stages.demos import collect_demos
    from agentic_ray.stages.imitation import imitate_stage

    s = load_settings(CONFIG, {"seed": seed, "wandb.mode": "disabled", "stages.il.demos": demos})
    torch.set_num_threads(s.ray.torch_threads)
    torch.manual_seed(s.seed)
    env = AgentTaskEnv(s.env)
    module = module_spec(s, env).build()
    env.close()
    il = s.stages.il
    demo_set = collect_demos(
        s.env, il.demos, il.wrong_sample_share, seed=s.seed, caller_errors=il.caller_error_kinds
    )
    imitate_stage(module, demo_set, il, s.seed)
    return s, module


def sample_episodes(demos: int, episodes: int, seed: int) -> list[Any]:
    """``episodes`` sampled training episodes (families in turn) of the ``demos``-demonstration imitation policy."""
    from agentic_ray.domains import get_domain
    from agentic_ray.eval.evaluator import ModulePolicy, rollout

    s, module = imitation_start(demos, seed)
    rng = np.random.default_rng(seed)
    families = s.env.family_list()
    d = get_domain(s.env.domain)
    tasks = [(families[i % len(families)], d.draw_training_seed(rng)) for i in range(episodes)]
    records, _ = rollout(ModulePolicy(module, deterministic=False), s.env, tasks)
    return records


def _corr(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.std() == 0 or b.std() == 0:
        return None
    return round(float(np.corrcoef(a, b)[0, 1]), 3)


def reward_signal(records: Sequence[Any], rewards: Any) -> dict[str, Any]:
    """Per-layer sums, completed vs failed, and their correlations with completion (see the module docstring).

    Args:
        records: finished episodes (``EpisodeRecord``), completed and failed ones both.
        rewards: a ``RewardPoolConfig``; its enabled layers are scored (the judge must be off).
    """
    from agentic_ray.rewards.layer_group_scorer import make_layers
    from agentic_ray.rewards.layers import LAYER_CLASSES
    from agentic_ray.rewards.layers.base import Granularity
    from agentic_ray.rewards.normalization import RewardNormalizer
    from agentic_ray.rewards.reward_vector import combine_layers

    layers = make_layers(rewards, judge_url=None)
    raw = [{n: np.asarray(layer.score(r), dtype=np.float32) for n, layer in layers.items()} for r in records]
    norm = RewardNormalizer({n: rewards.normalize_mode(n) for n in layers}, clip=rewards.normalize_clip)
    for values in raw:  # the statistics the pool would hold after this batch: every scored position
        for n, v in values.items():
            norm.update(n, v if LAYER_CLASSES[n].granularity is Granularity.STEP else v[-1:])
    weights = {n: rewards.weight(n) for n in layers}
    weighted: dict[str, list[float]] = {n: [] for n in layers}
    returns = []
    for r, values in zip(records, raw, strict=True):
        reward, _risk, normalised = combine_layers(values, norm, weights, r.num_steps)
        returns.append(float(reward.sum()))
        for n in layers:
            weighted[n].append(weights[n] * float(normalised[n].sum()))
    done = np.array([r.completed for r in records], dtype=bool)

    def split(xs: Sequence[float]) -> tuple[float, float]:
        a = np.asarray(xs, dtype=np.float64)
        c, f = (round(float(a[m].mean()), 3) if m.any() else math.nan for m in (done, ~done))
        return c, f

    out: dict[str, Any] = {
        "episodes": len(records),
        "completed_episodes": int(done.sum()),
        "layers": {},
    }
    for n in layers:
        sums = [float(v[n].sum()) for v in raw]
        (rc, rf), (wc, wf) = split(sums), split(weighted[n])
        out["layers"][n] = {
            "weight": weights[n],
            "raw_completed": rc,
            "raw_failed": rf,
            "completed": wc,
            "failed": wf,
            "corr": _corr(weighted[n], done),
        }
    out["return_completed"], out["return_failed"] = split(returns)
    out["return_corr"] = _corr(returns, done)
    families = sorted({r.task_family for r in records})
    out["family_corr"] = {
        f: _corr(
            [x for x, r in zip(returns, records, strict=True) if r.task_family == f],
            [r.completed for r in records if r.task_family == f],
        )
        for f in families
    }
    out["family_completion"] = {
        f: round(float(np.mean([r.completed for r in records if r.task_family == f])), 3) for f in families
    }
    return out


def plain(rewards: Any) -> Any:
    """The same enabled layers, weights and normalisation with every layer's constructor options cleared."""
    layers = {n: c.model_copy(update={"params": {}}) for n, c in rewards.layers.items()}
    return rewards.model_copy(update={"layers": layers})


def main(argv: Sequence[str] | None = None) -> None:
    from inspection_compare import CONFIG

    from agentic_ray.settings import load_settings

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--demos", type=int, default=40, help="demonstrations of the imitation start")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    records = sample_episodes(a.demos, a.episodes, a.seed)
    rewards = load_settings(CONFIG).rewards
    for name, cfg in (("config", rewards), ("plain", plain(rewards))):
        line = {"benchmark": "inspection_reward_signal", "rewards": name, "demos": a.demos, "seed": a.seed}
        print(json.dumps(line | reward_signal(records, cfg)), flush=True)


if __name__ == "__main__":
    main()
