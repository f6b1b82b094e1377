"""agentic_ray.rewards."""
