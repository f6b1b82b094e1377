"""Ray Tune sweeps over reward weights and AAAC settings, ranked on validation metrics.

``agentic-ray sweep --config tune_sweeps/<sweep>.yaml`` runs one (see ``tune_sweeps/README.md``). Parts, one job
per module: :mod:`.sweep_config` (settings), :mod:`.simplex` (bounded weight simplex), :mod:`.search_space`
(Tune ``param_space`` and back), :mod:`.trial` (the pipeline as a Tune function trainable),
:mod:`.sweep_runner` (Tuner, resume), :mod:`.pareto` / :mod:`.ranking` (fronts and ranks), :mod:`.outputs`
(CSV, PNG, best-config YAML), :mod:`.progress` (progress lines).
"""

from agentic_ray.sweeps.sweep_config import SweepSettings, load_sweep
from agentic_ray.sweeps.sweep_runner import SweepOutcome, resume_sweep, run_sweep

__all__ = ["SweepOutcome", "SweepSettings", "load_sweep", "resume_sweep", "run_sweep"]
