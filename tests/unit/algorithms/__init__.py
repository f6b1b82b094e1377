"""Unit tests of agentic_ray.algorithms."""
