"""agentic_ray.eval."""
