"""The policy service application: ``serve run serve_apps/policy.yaml`` (from the repository root).

The deployments live in :mod:`agentic_ray.serving.deployments` (importable wherever agentic-ray is installed,
which ``agentic-ray serve RUN_DIR`` relies on); this module is the application's import path.
"""

from agentic_ray.serving.deployments import PolicyDeployment, build_app

__all__ = ["PolicyDeployment", "build_app"]
