"""Golden trajectories: what the policy sees, step by step, is pinned by hashes recorded from the env before the
speed work of issue 32, so an optimisation of reset, task generation, the observation or the masks cannot change
a single bit of it.

For every built-in domain and fixed seeds, a fixed policy runs the env: the domain's scripted expert on the
validation split, and a seeded random masked policy on the training split, with and without injected faults
(breakers, outages, caller errors), in structured mode and, on two domains, prototype mode. Every step's
observation (its key order, each array's dtype, shape and bytes), masks (with their reasons and the node order pointers refer
to), reward, termination flags and info are hashed, one running SHA-256 per part, and compared with
:data:`GOLDEN`. A failure names the part that changed.

A change that is meant to change what the policy sees re-records the table and says why in its commit:

    python -m tests.unit.envs.test_env_golden
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import RandomMaskedPolicy

PARTS = ("obs", "masks", "reward", "info")

CASES: dict[str, tuple[str, str, str, bool]] = {
    # name: (domain, policy, action mode, faults)
    "ecommerce-expert": ("ecommerce", "expert", "structured", False),
    "ecommerce-random": ("ecommerce", "random", "structured", False),
    "ecommerce-random-faults": ("ecommerce", "random", "structured", True),
    "ecommerce-random-prototype": ("ecommerce", "random", "prototype", False),
    "helpdesk-expert": ("helpdesk", "expert", "structured", False),
    "helpdesk-random": ("helpdesk", "random", "structured", False),
    "helpdesk-random-faults": ("helpdesk", "random", "structured", True),
    "helpdesk-random-prototype": ("helpdesk", "random", "prototype", False),
    "helpdesk_memory-expert": ("helpdesk_memory", "expert", "structured", False),
    "helpdesk_memory-random": ("helpdesk_memory", "random", "structured", False),
    "helpdesk_memory-random-faults": ("helpdesk_memory", "random", "structured", True),
    "ecommerce_memory-expert": ("ecommerce_memory", "expert", "structured", False),
    "ecommerce_memory-random": ("ecommerce_memory", "random", "structured", False),
    "ecommerce_memory-random-faults": ("ecommerce_memory", "random", "structured", True),
    "inspection-expert": ("inspection", "expert", "structured", False),
    "inspection-random": ("inspection", "random", "structured", False),
    "inspection-random-faults": ("inspection", "random", "structured", True),
}
RANDOM_STEPS = 120

GOLDEN: dict[str, str] = {
    "ecommerce-expert": "1d431d520cd9 7947c9c6cae7 5a376ae74958 346c781b2a74",
    "ecommerce-random": "8f8c4f4aab34 12f6f936d19f 41429e70af00 8af197918b26",
    "ecommerce-random-faults": "7aacd1b20f1e 21e81d276d36 9c5148f8323f ab94a852dfaf",
    "ecommerce-random-prototype": "1491f6c032b9 a95a6b5a21b3 2f49417ab0df 57006c467388",
    "helpdesk-expert": "98737f9d1e7e e9d359dba501 cab03d5776b5 92385b9222e5",
    "helpdesk-random": "869f7554c80a a12ecc366c40 995827f7c6d9 c0a76bba8d0f",
    "helpdesk-random-faults": "4f28baf4ebd7 4b3af251c473 5d918305d51a 5dffac732287",
    "helpdesk-random-prototype": "d068821a038d 6ac2d2ca4dc3 d60be0af3f0b b9b516a29672",
    "helpdesk_memory-expert": "b7cf870809f9 3d02a90f68d5 11c723f7fdfd 89f9b8566fe5",
    "helpdesk_memory-random": "05bf0db7d12d 20f62e1d765b 160cb24c6517 20fc201d0f2a",
    "helpdesk_memory-random-faults": "a198aac04722 9fcc1b8ddaa8 c968bd57591b 2cfb6e5c1a2e",
    "ecommerce_memory-expert": "7278a71e99ad 347dfa15f6c4 bcbffa15c63f 1be6662f1162",
    "ecommerce_memory-random": "cca31aa4b421 ddb46525c5f2 ed4e40f20a1a 87c811d12298",
    "ecommerce_memory-random-faults": "532320fec320 b1835d38dd90 a8e5ffbe35e2 de0f161490d8",
    "inspection-expert": "0adf9a1ccdcd f6633fca7855 fa015933792e a60ac5143a69",
    "inspection-random": "11317093b76b f1a6e86c3288 1224f94a58e7 672906ed1814",
    "inspection-random-faults": "1676dda65ef1 450e596e456f f9598bd5be70 eadd60b08a6a",
}
"""Per case: the first 12 hex digits of each part's running SHA-256, in :data:`PARTS` order, recorded from main:
at 8540503, then at fdc80e9 (its memory refactor changed help-desk-memory's "masks" part, which also covers the
reasons and the hard/business flags, and its infos, not its observations or rewards; and it added
ecommerce_memory). The speed work of issue 32 reproduces both."""


def _canon(x: Any) -> Iterator[bytes]:
    """A byte stream that identifies ``x`` exactly: arrays by dtype, shape and bytes, floats by ``repr``, dicts
    with their keys in sorted order, sets sorted; anything else by type and ``repr``."""
    if isinstance(x, np.ndarray):
        yield f"nd{x.dtype.str}{x.shape}".encode()
        yield np.ascontiguousarray(x).tobytes()
    elif isinstance(x, dict):
        yield b"{"
        for k in sorted(x, key=repr):
            yield from _canon(k)
            yield b":"
            yield from _canon(x[k])
        yield b"}"
    elif isinstance(x, list | tuple):
        yield b"[" if isinstance(x, list) else b"("
        for v in x:
            yield from _canon(v)
            yield b","
        yield b"]"
    elif isinstance(x, set | frozenset):
        yield b"set"
        yield from _canon(sorted(x, key=repr))
    elif isinstance(x, np.generic):
        yield f"np{x.dtype.str}".encode() + x.tobytes()
    else:
        yield f"{type(x).__name__}:{x!r};".encode()


class _Digest:
    def __init__(self) -> None:
        self.h = {p: hashlib.sha256() for p in PARTS}

    def add(self, part: str, x: Any) -> None:
        for b in _canon(x):
            self.h[part].update(b)

    def observe(
        self, env: AgentTaskEnv, obs: dict[str, np.ndarray], reward: Any, info: dict[str, Any]
    ) -> None:
        """One reset's or step's output: the observation, the env's masks and node order, reward, info."""
        self.add("obs", (list(obs), obs))  # the key order too: a consumer may flatten in dict order
        m = env.current_masks
        self.add(
            "masks",
            (m.skill_mask, m.pointer_mask, m.list_mask, m.hard, m.soft, m.business, m.reasons),
        )
        self.add("masks", dict(env.builder.node_ids))
        self.add("reward", reward)
        self.add("info", info)

    def hexdigests(self) -> str:
        return " ".join(self.h[p].hexdigest()[:12] for p in PARTS)


def _env(domain: str, mode: str, faults: bool, split: str) -> AgentTaskEnv:
    cfg = AgentTaskEnvConfig(domain=domain, action_mode=mode, split=split, validation_per_family=1)  # type: ignore[arg-type]
    if faults:
        cfg.faults.enabled = True
        cfg.faults.start_share = 0.6
        cfg.faults.kinds = {"outage": 1.0, "transient": 1.0, "garbage": 1.0}
        cfg.faults.transient_rate = 0.6
        cfg.faults.caller_error_share = 0.5
    return AgentTaskEnv(cfg)


def run_case(name: str) -> str:
    """The digests of one case of :data:`CASES` (as :data:`GOLDEN` holds them)."""
    domain, policy, mode, faults = CASES[name]
    dg = _Digest()
    if policy == "expert":
        env = _env(domain, mode, faults, "validation")
        expert = env.domain.expert()

        def act(_obs: dict[str, np.ndarray]) -> Any:
            return env.encode_action(*expert.plan(env.view()))

        obs, info = env.reset(seed=0)
        dg.observe(env, obs, None, info)
        for _ in range(len(env.families)):
            done = False
            while not done:
                obs, r, term, trunc, info = env.step(act(obs))
                dg.observe(env, obs, (r, term, trunc), info)
                done = term or trunc
            obs, info = env.reset()
            dg.observe(env, obs, None, info)
    else:
        env = _env(domain, mode, faults, "train")
        act: Callable[[dict[str, np.ndarray]], Any] = RandomMaskedPolicy(env.layout, seed=3).act
        obs, info = env.reset(seed=11)
        dg.observe(env, obs, None, info)
        for _ in range(RANDOM_STEPS):
            obs, r, term, trunc, info = env.step(act(obs))
            dg.observe(env, obs, (r, term, trunc), info)
            if term or trunc:
                obs, info = env.reset()
                dg.observe(env, obs, None, info)
    env.close()
    return dg.hexdigests()


@pytest.mark.parametrize("name", list(CASES))
def test_trajectory_matches_the_recorded_one(name: str) -> None:
    got, want = run_case(name).split(), GOLDEN[name].split()
    changed = [p for p, a, b in zip(PARTS, got, want, strict=True) if a != b]
    assert not changed, f"{name}: {changed} differ from the recorded trajectory (got {got}, recorded {want})"


if __name__ == "__main__":
    print("GOLDEN: dict[str, str] = {")
    for n in CASES:
        print(f'    "{n}": "{run_case(n)}",')
    print("}")
