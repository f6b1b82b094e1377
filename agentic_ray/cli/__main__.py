"""``python -m agentic_ray.cli``."""

from agentic_ray.cli import app

app()
