"""Seed every training iteration from (run seed, stage, iteration), so a resumed run samples what the original did.

RLlib seeds envs and action sampling once, when an EnvRunner is built; neither the envs' RNG state nor torch's is
part of a checkpoint. A run killed after iteration k and resumed from its checkpoint would therefore sample
iteration k+1 from freshly seeded envs, unlike the run that was never killed. With :func:`reseed_iteration` called
at the start of every iteration, both runs start iteration k+1 from the same seeds (envs reset with the iteration's
seed, the global RNGs of every EnvRunner process and of the driver, which hosts a local learner, reseeded).
"""

from __future__ import annotations

import hashlib
from typing import Any

from ray.rllib.utils.debug import update_global_seed_if_necessary


def iteration_seed(base_seed: int, *parts: object) -> int:
    """A 31-bit seed derived from the run seed and e.g. the stage name and iteration number."""
    digest = hashlib.sha256(repr((int(base_seed), *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def reseed_env_runner(env_runner: Any, seed: int) -> None:
    """Reset an EnvRunner's envs with ``seed`` at its next sample and reseed its process's global RNGs."""
    env_runner._seed = int(seed)
    env_runner._needs_initial_reset = True
    update_global_seed_if_necessary(env_runner.config.framework_str, int(seed))


def reseed_iteration(algo: Any, seed: int) -> None:
    """Reseed the driver and every EnvRunner (EnvRunner ``i`` with ``seed + 7919·i``) before an iteration."""
    update_global_seed_if_necessary(algo.config.framework_str, int(seed))

    def _reseed(er: Any) -> None:
        if getattr(er, "env", None) is not None:
            reseed_env_runner(er, int(seed) + 7919 * int(er.worker_index))

    algo.env_runner_group.foreach_env_runner(_reseed, local_env_runner=True)
