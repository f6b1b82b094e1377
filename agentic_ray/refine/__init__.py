"""The loop from production back to training: the Serve app's feedback, re-scored, attributed, turned into an
incremental dataset and, past a trigger, into a canary candidate (:func:`refine`)."""

from agentic_ray.refine.refine_config import RefineConfig
from agentic_ray.refine.refiner import RefineReport, refine

__all__ = ["RefineConfig", "RefineReport", "refine"]
