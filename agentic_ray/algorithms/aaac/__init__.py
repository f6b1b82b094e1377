"""AAAC (Adaptive Advantage Actor-Critic) on RLlib's new API stack.

Public API: :class:`AAACConfig` / :class:`AAAC` (``aaac.py``), the module contract :class:`TwoCriticAPI`
(``two_critic_api.py``) and the default MLP module :class:`DefaultAAACTorchRLModule`.
"""

from agentic_ray.algorithms.aaac.aaac import AAAC, AAACConfig
from agentic_ray.algorithms.aaac.default_aaac_rl_module import DefaultAAACTorchRLModule
from agentic_ray.algorithms.aaac.two_critic_api import TwoCriticAPI, check_parameter_groups

__all__ = ["AAAC", "AAACConfig", "DefaultAAACTorchRLModule", "TwoCriticAPI", "check_parameter_groups"]
