"""agentic_ray.envs."""
