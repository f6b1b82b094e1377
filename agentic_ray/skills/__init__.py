"""agentic_ray.skills."""
