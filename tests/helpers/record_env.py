"""A small gymnasium env that emits a valid ``EpisodeRecord`` on its last step, until the e-commerce env exists.

Four skills (inventory.check, sms.send, order.update_address, refund.trigger), three subgoals with one dependency
(check before update), seeded tool failures and latencies, a simulated user and entity recall. The env reward is 0:
the env owns dynamics only, every reward comes from the reward layers.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from agentic_ray.keys import EPISODE_RECORD
from agentic_ray.rewards.episode_record import EpisodeRecord, StepRecord
from agentic_ray.rewards.layers.user_experience_layer import COMPLAINT_RATE
from agentic_ray.rewards.ltv_model import CONTEXT_FEATURES

# The case facts the reward layers read (a simulated customer's level, complaint rate and verification).
CONTEXT_CUSTOMER_LEVEL, CONTEXT_COMPLAINT_RATE, CONTEXT_VERIFIED = CONTEXT_FEATURES
assert COMPLAINT_RATE == CONTEXT_COMPLAINT_RATE

SKILLS = ("inventory.check", "sms.send", "order.update_address", "refund.trigger")
GOALS = ("g_check", "g_notify", "g_update")
GOAL_OF_SKILL = {0: "g_check", 1: "g_notify", 2: "g_update"}
CODES = ("OK", "TOOL_TIMEOUT", "BAD_PARAMS", "CIRCUIT_OPEN")
CODE_P = (0.85, 0.06, 0.05, 0.04)


class RecordEmittingEnv(gym.Env):
    """Fixed-length tool-calling episodes.

    Config keys: ``episode_len`` (7), ``seed`` (0), ``step_delay_s`` (0.0, simulated env cost per step).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        config = dict(config or {})
        self.episode_len = int(config.get("episode_len", 7))
        self.step_delay_s = float(config.get("step_delay_s", 0.0))
        base_seed = int(config.get("seed", 0)) + 1000 * int(getattr(config, "worker_index", 0) or 0)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
        self.action_space = gym.spaces.Discrete(len(SKILLS))
        self._rng = np.random.default_rng(base_seed)
        self._n_episodes = 0
        self._seed = base_seed

    def _obs(self) -> np.ndarray:
        done = [g in self._done for g in GOALS]
        return np.array(
            [*map(float, done), self._t / self.episode_len, self._user[CONTEXT_COMPLAINT_RATE], 0.0],
            np.float32,
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._seed = seed
        self._n_episodes += 1
        self._t = 0
        self._done: list[str] = []
        self._steps: list[StepRecord] = []
        self._violations = 0
        self._user = {
            CONTEXT_CUSTOMER_LEVEL: float(self._rng.integers(0, 6)),
            CONTEXT_COMPLAINT_RATE: float(self._rng.beta(1.5, 6.0)),
            CONTEXT_VERIFIED: float(self._rng.random() < 0.7),
        }
        self._mentioned = ["order_1", "addr_2"]
        self._recalled: list[str] = []
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.step_delay_s:
            import time

            time.sleep(self.step_delay_s)
        a = int(action)
        code = str(self._rng.choice(CODES, p=CODE_P))
        ok = code == "OK"
        satisfied: list[str] = []
        redundant = False
        high_risk = a == 3 and "g_check" not in self._done
        if ok:
            goal = GOAL_OF_SKILL.get(a)
            if goal is None or goal in self._done:
                redundant = True
            else:
                if goal == "g_update" and "g_check" not in self._done:
                    self._violations += 1
                self._done.append(goal)
                satisfied.append(goal)
                if a == 1:
                    self._recalled = ["order_1"] if self._t > 2 else ["order_1", "addr_2"]
        self._steps.append(
            StepRecord(
                skill=SKILLS[a],
                args={},
                result_code=code,
                ok=ok,
                latency_ms=float(self._rng.uniform(50, 600)),
                high_risk=high_risk,
                risk_weight=1.0 if high_risk else 0.0,
                goals_satisfied=satisfied,
                redundant=redundant,
            )
        )
        self._t += 1
        terminated = self._t >= self.episode_len
        info: dict[str, Any] = {}
        if terminated:
            completed = all(g in self._done for g in GOALS)
            failures = sum(1 for s in self._steps if not s.ok)
            info[EPISODE_RECORD] = EpisodeRecord(
                episode_id=f"rec-{self._seed}-{self._n_episodes}",
                domain="test",
                task_family="address_error",
                task_seed=self._seed,
                steps=self._steps,
                completed=completed,
                failed=(not completed) and failures >= 3,
                truncated=False,
                optimal_steps=3,
                goals=list(GOALS),
                goal_deps=[("g_check", "g_update")],
                goals_done_order=list(self._done),
                dag_valid=self._violations == 0,
                dependency_violations=self._violations,
                entities_mentioned=self._mentioned,
                entities_recalled=self._recalled,
                context=self._user,
            ).to_dict()
        return self._obs(), 0.0, terminated, False, info
