"""agentic_ray.algorithms."""
