"""Why RL barely moves greedy completion on inspection (issue 30); one JSON line per policy and mode.

Each policy plays the fixed validation tasks (``--tasks-per-family`` of every family, faults off) in each of
``--modes``: greedy (the mode of every head, as the pipeline's evaluations and ``benchmarks/inspection.py
--compare``'s curve act) and sampled (the stochastic policy RL trains and is rewarded as). Per policy and mode:
completion overall and per family, mean steps, how the failed episodes ended (:func:`failure_shape`): ``loop``
when the episode's last :data:`LOOP_CALLS` calls were one identical call (the greedy policy repeating a wrong
``db_update`` or ``rank_topk`` until the step budget ran out), ``failed`` for an explicit failure (e.g. a scratch
recorded as a crack), ``truncated`` otherwise, each keyed by the skill of the last call; and the mean ``detect``
threshold per family.

Policies: ``il``, the imitation start of ``--compare`` (``--demos`` demonstrations, seed ``--seed``), or with
``--run-dir RUN`` the run's checkpoints named by ``--stages`` (default: ``il`` and the last, ``latest`` where the
run has one; a run of ``agentic-ray train`` or of the pipeline on ``--compare``'s settings), so one run's stages
can be read side by side, greedy and sampled. Also the observation-only rule policy at detect's defaults
(``rule``, greedy only), which reads what the tools revealed: what the information in the observation allows.

    python benchmarks/inspection_rl_diagnosis.py [--tasks-per-family 10] [--demos 40] [--seed 0]
    python benchmarks/inspection_rl_diagnosis.py --run-dir RUN [--stages il rl reflection] [--modes greedy]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported as benchmarks.<name>

LOOP_CALLS = 3
"""A failed episode whose last this many calls were the same call (skill and arguments) ended in a loop."""


def failure_shape(record: Any) -> str | None:
    """How an episode ended: None when it completed, else ``loop:<skill>``, ``failed:<skill>`` or
    ``truncated:<skill>`` (the skill of its last call; see the module docstring)."""
    if record.completed:
        return None
    if not record.steps:
        return "truncated:none"
    last = record.steps[-1].skill
    tail = [s.call_key() for s in record.steps[-LOOP_CALLS:]]
    if len(tail) == LOOP_CALLS and len(set(tail)) == 1:
        return f"loop:{last}"
    return f"{'failed' if record.failed else 'truncated'}:{last}"


def summarize(records: Sequence[Any]) -> dict[str, Any]:
    """Completion overall and per family, mean steps, the failed episodes' :func:`failure_shape` counts, and the
    mean ``detect`` threshold per family (:func:`inspection.detect_thresholds`)."""
    from inspection import detect_thresholds

    families = sorted({r.task_family for r in records})
    shapes = Counter(s for s in map(failure_shape, records) if s is not None)
    return {
        "episodes": len(records),
        "completion": round(float(np.mean([r.completed for r in records])), 3),
        "family_completion": {
            f: round(float(np.mean([r.completed for r in records if r.task_family == f])), 3)
            for f in families
        },
        "steps": round(float(np.mean([r.num_steps for r in records])), 2),
        "failures": dict(shapes.most_common()),
        "loop_share_of_failures": round(
            sum(v for k, v in shapes.items() if k.startswith("loop:")) / max(1, sum(shapes.values())), 3
        ),
        "detect_threshold": detect_thresholds(list(records)),
    }


def play(module: Any, env_config: Any, tasks: list[tuple[str, int]], deterministic: bool) -> list[Any]:
    from agentic_ray.eval.evaluator import ModulePolicy, rollout

    module.eval()
    records, _ = rollout(ModulePolicy(module, deterministic=deterministic), env_config, tasks)
    return records


def rule_records(env_config: Any, tasks: list[tuple[str, int]]) -> list[Any]:
    """The default-threshold rule policy (:class:`~agentic_ray.domains.inspection.baseline.FixedThresholdPolicy`)
    on ``tasks``."""
    from agentic_ray.domains.inspection.baseline import FixedThresholdPolicy
    from agentic_ray.eval.evaluator import rollout

    plan = FixedThresholdPolicy().plan

    class _Rule:
        def act_batch(self, obs: list[Any], envs: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
            return [e.encode_action(*plan(e.view())) for e in envs], [{} for _ in envs]

    records, _ = rollout(_Rule(), env_config, tasks)
    return records


def main(argv: Sequence[str] | None = None) -> None:
    import torch

    from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
    from agentic_ray.eval.evaluator import validation_env_config, validation_tasks

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks-per-family", type=int, default=10)
    p.add_argument("--demos", type=int, default=40, help="demonstrations of the imitation start")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--run-dir", default=None, help="a run whose stage checkpoints to read instead (see --stages)"
    )
    p.add_argument(
        "--stages",
        nargs="+",
        default=None,
        help="with --run-dir: the stage checkpoints to read (e.g. il rl reflection; default: il and the last)",
    )
    p.add_argument("--modes", nargs="+", choices=("greedy", "sampled"), default=("greedy", "sampled"))
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    if a.run_dir is None:
        from inspection_reward_signal import imitation_start

        s, module = imitation_start(a.demos, a.seed)
        env_cfg, modules = s.env, {"il": module}
    else:
        from agentic_ray.eval.policy_loading import load_policy_module, pick_checkpoint

        env_cfg = AgentTaskEnvConfig.model_validate(
            json.loads((Path(a.run_dir) / "settings.json").read_text())["env"]
        )
        last = "latest" if (Path(a.run_dir) / "checkpoints" / "latest").exists() else None
        stages = a.stages or ("il", last)
        modules = {st or "last": load_policy_module(pick_checkpoint(a.run_dir, st)) for st in stages}
    venv = validation_env_config(env_cfg, 0.0)
    tasks = validation_tasks(venv, a.tasks_per_family)
    head = {"benchmark": "inspection_rl_diagnosis", "tasks_per_family": a.tasks_per_family}
    head |= {"run_dir": a.run_dir} if a.run_dir else {"demos": a.demos, "seed": a.seed}
    for name, module in modules.items():
        for mode in a.modes:
            recs = play(module, venv, tasks, deterministic=mode == "greedy")
            line = head | {"policy": name, "mode": mode} | summarize(recs)
            print(json.dumps(line), flush=True)
    print(json.dumps(head | {"policy": "rule", "mode": "greedy"} | summarize(rule_records(venv, tasks))))


if __name__ == "__main__":
    main()
