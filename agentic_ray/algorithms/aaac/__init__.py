"""agentic_ray.algorithms.aaac."""
