"""AAAC (Adaptive Advantage Actor-Critic) on RLlib's new API stack.

Public API: :class:`AAACConfig` / :class:`AAAC` (``aaac.py``), the module contract :class:`TwoCriticAPI`
(``two_critic_api.py``) and the default MLP module :class:`DefaultAAACTorchRLModule`.

Importing this package registers AAAC with Tune under the name ``"AAAC"``, as RLlib registers its own
algorithms, so ``tune.Tuner("AAAC", param_space=config)`` works like ``tune.Tuner("PPO", ...)``.
"""

from ray.tune.registry import register_trainable

from agentic_ray.algorithms.aaac.aaac import AAAC, AAACConfig
from agentic_ray.algorithms.aaac.default_aaac_rl_module import DefaultAAACTorchRLModule
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI, check_parameter_groups

register_trainable("AAAC", AAAC)

__all__ = ["AAAC", "AAACConfig", "DefaultAAACTorchRLModule", "TwoCriticAPI", "check_parameter_groups"]
