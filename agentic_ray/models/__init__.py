"""agentic_ray.models."""
