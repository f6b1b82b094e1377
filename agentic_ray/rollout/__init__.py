"""agentic_ray.rollout."""
