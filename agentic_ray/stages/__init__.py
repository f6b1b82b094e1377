"""agentic_ray.stages."""
