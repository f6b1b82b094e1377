"""PPO-Lagrangian (cost critic + learned Lagrange multiplier), the constrained-RL baseline AAAC is measured against."""

from agentic_ray.algorithms.ppo_lagrangian.ppo_lagrangian import PPOLagrangian, PPOLagrangianConfig

__all__ = ["PPOLagrangian", "PPOLagrangianConfig"]
