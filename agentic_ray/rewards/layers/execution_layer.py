"""L1 execution / completion: was each tool call executed cleanly, and did the task finish?

Per step, the gateway's result code is scored (seed 000's execution table): success +1, timeout −2,
bad parameters −3 (every caller error of the gateway), circuit breaker open −5. An action the mask forbade
scores ``masked_value`` (−3, as the env's cheap reward does; seed 000's rule agent used −10 for an invalid skill
id, set ``masked_value=-10`` to reproduce it). Any other failure code (upstream errors, garbled output) scores
``other_failure`` (−1).

A successful call that advanced no goal (``redundant``: asked again for what was already done, or a call no goal
needs) scores ``redundant_value`` (0) instead of +1, as the env's own reward nets it to 0. Paying +1 for it made
looping a harmless successful call until the step budget ran out worth more than completing the task (a loop of
eight OK calls earns +8, a four-step completion +4 plus the +1 completion term), and RL fine-tuning learned
exactly that: a wrong SMS template, re-sent until truncation.

At the last step the completion term of seed 002 is added: +1 done, −0.5 explicit failure, 0 ongoing
(truncated without completion).

``progress``: what a successful call that advanced the goal DAG earns. ``"call"`` (the default): the OK value
(+1), so an episode's sum grows with the number of goals its task has. ``"share"``: the OK value times the share of
the task's goals the call satisfied, so the goal calls of any task sum to the OK value when it completes: the
layer pays the fraction of the task done, not the number of calls it took; a successful call that satisfied no goal
(a lookup) earns ``redundant_value``. Why it exists (issue 30, ``benchmarks/inspection_reward_signal.py``: 200
sampled episodes of the 40-demonstration imitation policy on ``configs/inspection.yaml``, whose tasks have 2 to 8
goals): per call, the families with the most goals, which the policy completes least (top_cracks 8 goals, 25%
completed; camera_fault 2 goals, 100%), earned the most, so across tasks the layered return did not correlate with
completion (r = 0.02), though within each family it did (0.63 to 0.99); with this and the detection layers'
``baseline: default``, r = 0.79.

``repeat_value`` (off by default, ``None``): what a successful call earns when it is the same call (skill and
arguments) as an earlier step of the episode and satisfied no goal, in place of what it would have earned. Why it
exists (issue 30, ``benchmarks/inspection_rl_diagnosis.py``): 91% of the inspection imitation start's greedy
failures are one identical wrong ``db_update`` or ``rank_topk`` repeated until the step budget runs out, and such a
repeat earns what the first wrong call did (``redundant_value``, 0), so no layer says which step of a failed
episode was the wasted one; with a negative value each repeat is charged where it happens. Measured (the sixth
campaign of ``benchmarks/inspection_compare.py``, ``repeat_value: -1`` on the layered arm): seeds 0-2 reached
completion 0.6 in 1,409 episodes against 2,032 without it, but on six seeds the layered arm was no faster than the
sparse reward (ratio 1.07 [0.627, 1.793]), so it stays off by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.base import CostClass, Granularity, RewardLayer, Stream
from agentic_ray.rewards.layers.task_outcome_layer import outcome_value

DEFAULT_CODE_VALUES: dict[str, float] = {
    "OK": 1.0,
    "TOOL_TIMEOUT": -2.0,
    # bad parameters: the gateway's caller errors (agentic_ray.skills.executor.CALLER_ERRORS)
    "BAD_PARAMS": -3.0,
    "INVALID_INPUT": -3.0,
    "PRECONDITION_FAILED": -3.0,
    "NOT_FOUND": -3.0,
    "CONFLICT": -3.0,
    "NOT_WHITELISTED": -3.0,
    "DEPENDENCY_MISSING": -3.0,
    "CIRCUIT_OPEN": -5.0,
}


class ExecutionLayer(RewardLayer):
    """L1: per-step execution codes plus the completion term on the last step.

    Args:
        code_values: result code → value; merged over :data:`DEFAULT_CODE_VALUES`.
        other_failure: value of a failed step whose code is not in the table.
        masked_value: value of a step whose action the mask forbade.
        redundant_value: value of a successful step that advanced no goal.
        done_value: the completion term of an episode that completed.
        failure_value: the completion term of an explicit failure.
        ongoing_value: the completion term of an episode that ended neither way (truncated).
        progress: ``"call"`` or ``"share"``: what a goal-advancing successful call earns (see the module
            docstring).
        repeat_value: value of a successful call identical to an earlier one that satisfied no goal; ``None``
            leaves it at what the call earns otherwise (see the module docstring).
    """

    name = "execution"
    version = "2"
    cost = CostClass.SYNC
    stream = Stream.REWARD
    granularity = Granularity.STEP
    default_weight = 0.4

    def __init__(
        self,
        code_values: Mapping[str, float] | None = None,
        other_failure: float = -1.0,
        masked_value: float = -3.0,
        done_value: float = 1.0,
        failure_value: float = -0.5,
        ongoing_value: float = 0.0,
        redundant_value: float = 0.0,
        progress: Literal["call", "share"] = "call",
        repeat_value: float | None = None,
    ) -> None:
        if progress not in ("call", "share"):
            raise ValueError(f"execution: progress must be 'call' or 'share', got {progress!r}")
        self.code_values = {**DEFAULT_CODE_VALUES, **(code_values or {})}
        self.other_failure = float(other_failure)
        self.masked_value = float(masked_value)
        self.done_value = float(done_value)
        self.failure_value = float(failure_value)
        self.ongoing_value = float(ongoing_value)
        self.redundant_value = float(redundant_value)
        self.progress = progress
        self.repeat_value = None if repeat_value is None else float(repeat_value)

    def step_value(self, result_code: str, ok: bool, masked: bool, redundant: bool = False) -> float:
        """Value of one executed step."""
        if masked:
            return self.masked_value
        if ok and redundant:
            return self.redundant_value
        if result_code in self.code_values:
            return self.code_values[result_code]
        return self.code_values["OK"] if ok else self.other_failure

    def completion_value(self, record: EpisodeRecord) -> float:
        """Seed 002's L1 term: +1 done, −0.5 explicit failure, 0 ongoing."""
        return outcome_value(record, self.done_value, self.failure_value, self.ongoing_value)

    def score(self, record: EpisodeRecord) -> np.ndarray:
        out = np.array(
            [self.step_value(s.result_code, s.ok, s.masked, s.redundant) for s in record.steps],
            dtype=np.float32,
        )
        if self.progress == "share":
            n = max(1, len(record.goals))
            for t, s in enumerate(record.steps):
                if s.ok and not s.masked and not s.redundant:  # a goal call, or a lookup (no goal)
                    share = len(s.goals_satisfied) / n
                    out[t] = self.code_values["OK"] * share if share > 0 else self.redundant_value
        if out.size == 0:
            raise ValueError(f"episode {record.episode_id} has no steps")
        if self.repeat_value is not None:
            seen: set[tuple[str, str]] = set()
            for t, s in enumerate(record.steps):
                call = s.call_key()
                if call in seen and s.ok and not s.masked and not s.goals_satisfied:
                    out[t] = self.repeat_value
                seen.add(call)
        out[-1] += self.completion_value(record)
        return out
