"""agentic_ray.memory."""
