"""From sweep settings to a Tune ``param_space``, and from a trial's Tune config back to experiment overrides.

A trial's config has one entry per swept setting, keyed by its dotted settings path (``algo.lr``), plus the
reward weights: one ``reward_weights`` text per grid point, or ``reward_weights_u0..u{k-2}`` unit-cube coordinates
for random and Optuna search (:mod:`agentic_ray.sweeps.simplex` maps them onto the bounded simplex, so every
sample is valid). :class:`SearchSpace` holds what a trial needs to decode its config and is sent to every trial.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ray import tune

from agentic_ray.rewards.layers import LAYER_CLASSES, Stream
from agentic_ray.settings import ExperimentSettings, SettingsError, apply_overrides
from agentic_ray.sweeps.simplex import (
    EPS,
    check_bounds,
    simplex_grid,
    unit_cube_from_weights,
    weights_from_unit_cube,
)
from agentic_ray.sweeps.sweep_config import ParamSpec, SweepSettings

WEIGHTS_KEY = "reward_weights"
"""Tune config key of a grid point's weights, as text (``"execution=0.4,efficiency=0.15"``): Tune reads the keys
of a dict and the items of a list as config paths of their own, which breaks preset points on the grid."""


def format_weights(layers: tuple[str, ...] | list[str], weights: list[float]) -> str:
    """A grid point as its Tune config value (exact floats, ``layers`` order)."""
    return ",".join(f"{n}={w!r}" for n, w in zip(layers, weights, strict=True))


def parse_weights(text: str) -> dict[str, float]:
    """The inverse of :func:`format_weights`."""
    return {n: float(w) for n, _, w in (item.partition("=") for item in text.split(","))}


def unit_key(i: int) -> str:
    """Tune config key of the ``i``-th unit-cube coordinate of the reward weights."""
    return f"{WEIGHTS_KEY}_u{i}"


def weight_path(layer: str) -> str:
    """The settings path of a reward layer's weight."""
    return f"rewards.layers.{layer}.weight"


@dataclass(frozen=True)
class SearchSpace:
    """The decoded search space: reward-weight simplex, other swept paths, and the experiment's defaults."""

    layers: tuple[str, ...] = ()
    lo: tuple[float, ...] = ()
    hi: tuple[float, ...] = ()
    total: float = 1.0
    params: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)  # settings path -> the experiment's value

    def weights(self, config: dict[str, Any]) -> dict[str, float]:
        """The reward weights a trial config stands for (``{}`` when no weights are swept)."""
        if not self.layers:
            return {}
        if WEIGHTS_KEY in config:
            weights = parse_weights(config[WEIGHTS_KEY])
            return {n: weights[n] for n in self.layers}
        u = [float(config[unit_key(i)]) for i in range(len(self.layers) - 1)]
        w = weights_from_unit_cube(u, self.lo, self.hi, self.total)
        # Rounded far below any effect (1e-10) so the default point reads back as 0.15, not 0.15000000000000002.
        return {n: round(x, 10) for n, x in zip(self.layers, w, strict=True)}

    def overrides(self, config: dict[str, Any]) -> dict[str, Any]:
        """Dotted experiment overrides of a trial config."""
        out = {weight_path(n): w for n, w in self.weights(config).items()}
        out.update({p: _plain(config[p]) for p in self.params})
        return out

    def is_default(self, overrides: dict[str, Any]) -> bool:
        """Whether a trial's overrides equal the experiment's own values (the baseline)."""
        return all(_same(overrides.get(k), v) for k, v in self.defaults.items())


def _plain(v: Any) -> Any:
    """numpy scalars (Optuna, Tune samplers) as Python numbers, so they dump to YAML and JSON."""
    return v.item() if hasattr(v, "item") else v


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)
    return bool(a == b)


def _lookup(raw: dict[str, Any], path: str) -> tuple[bool, Any]:
    d: Any = raw
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return False, None
        d = d[part]
    return True, d


def _algo_config_default(settings: ExperimentSettings, name: str) -> tuple[bool, Any]:
    """The algorithm config's own default of a ``.training()`` argument (``w_reward`` → 0.7 for AAAC)."""
    if settings.algo.name == "aaac":
        from agentic_ray.algorithms.aaac import AAACConfig

        cfg: Any = AAACConfig()
    else:
        from ray.rllib.algorithms.ppo import PPOConfig

        cfg = PPOConfig()
    return (True, getattr(cfg, name)) if hasattr(cfg, name) else (False, None)


def _validate(base_raw: dict[str, Any], overrides: dict[str, Any], what: str) -> None:
    try:
        ExperimentSettings.model_validate(apply_overrides(copy.deepcopy(base_raw), overrides))
    except ValueError as e:
        raise SettingsError(f"{what}: gives an invalid experiment: {e}") from e


def build_search_space(sweep: SweepSettings, base_raw: dict[str, Any]) -> SearchSpace:
    """Check the sweep against its base experiment and decode its space.

    Args:
        sweep: The sweep settings.
        base_raw: The base experiment as a raw dict, sweep overrides applied (:meth:`SweepSettings.base_raw`).

    Raises:
        SettingsError: a swept layer is not an enabled reward-stream layer of the experiment, a path is not a
            setting, a value gives an invalid experiment, or the experiment's own values (the baseline) lie
            outside the space while ``include_default`` is on.
    """
    base = ExperimentSettings.model_validate(copy.deepcopy(base_raw))
    space = _weights_space(sweep, base, base_raw)
    defaults = dict(space.defaults)
    dumped = base.model_dump(mode="json")  # the experiment with every default filled in
    for path, spec in sweep.params.items():
        if path in defaults:
            raise SettingsError(f"params.{path}: this weight is already searched by reward_weights")
        defaults[path] = _default_of(path, spec, base, dumped)
        for candidate in _candidates(spec):
            _validate(base_raw, {path: candidate}, f"params.{path}={candidate!r}")
        if sweep.include_default and sweep.searcher == "optuna" and not _contains(spec, defaults[path]):
            raise SettingsError(
                f"params.{path}: the experiment's value {defaults[path]!r} is outside the searched values/range; "
                "adjust the space or set include_default: false"
            )
    return dataclasses.replace(space, params=tuple(sweep.params), defaults=defaults)


def _default_of(path: str, spec: ParamSpec, base: ExperimentSettings, dumped: dict[str, Any]) -> Any:
    """The experiment's value of a swept setting (its ``default:``, the settings, or the algorithm config)."""
    if spec.default is not None:
        return spec.default
    found, value = _lookup(dumped, path)
    if not found and path.startswith("algo.training."):
        found, value = _algo_config_default(base, path[len("algo.training.") :])
        if not found:
            raise SettingsError(f"params.{path}: the {base.algo.name} config has no setting by that name")
    if not found:
        raise SettingsError(f"params.{path}: no such setting in the experiment; give `default:`")
    return value


def _weights_space(sweep: SweepSettings, base: ExperimentSettings, base_raw: dict[str, Any]) -> SearchSpace:
    """The reward-weight part of the space (empty without ``reward_weights``)."""
    rw = sweep.reward_weights
    if rw is None:
        return SearchSpace()
    if base.rewards is None:
        raise SettingsError("reward_weights: the experiment has no reward pool (`rewards:`) to weight")
    enabled = base.rewards.enabled_layers()
    for n in rw.layers:
        if n not in LAYER_CLASSES or LAYER_CLASSES[n].stream is not Stream.REWARD or n not in enabled:
            raise SettingsError(
                f"reward_weights.layers: {n!r} is not an enabled reward-stream layer of the experiment "
                f"(enabled: {enabled})"
            )
    default_w = [base.rewards.weight(n) for n in rw.layers]
    total = float(rw.total if rw.total is not None else sum(default_w))
    lo, hi = rw.bounds(total)
    try:
        check_bounds(lo, hi, total)
    except ValueError as e:
        raise SettingsError(f"reward_weights: {e}") from e
    inside = abs(sum(default_w) - total) <= 1e-6 and all(
        a - EPS <= w <= b + EPS for w, a, b in zip(default_w, lo, hi, strict=True)
    )
    if sweep.include_default and not inside:
        raise SettingsError(
            f"reward_weights: the experiment's weights {dict(zip(rw.layers, default_w, strict=True))} lie "
            f"outside the space (total {total}, bounds {rw.minimum} / {rw.maximum}); adjust the space "
            "or set include_default: false"
        )
    for p in _grid_points(sweep, lo, hi, total):
        _validate(base_raw, {weight_path(n): w for n, w in zip(rw.layers, p, strict=True)}, "reward_weights")
    return SearchSpace(
        layers=tuple(rw.layers),
        lo=tuple(lo),
        hi=tuple(hi),
        total=total,
        defaults={weight_path(n): w for n, w in zip(rw.layers, default_w, strict=True)},
    )


def _grid_points(sweep: SweepSettings, lo: list[float], hi: list[float], total: float) -> list[list[float]]:
    rw = sweep.reward_weights
    assert rw is not None
    if rw.points is not None:
        for p in rw.points:
            if abs(sum(p) - total) > 1e-6 or any(
                not a - EPS <= w <= b + EPS for w, a, b in zip(p, lo, hi, strict=True)
            ):
                raise SettingsError(
                    f"reward_weights.points: {p} must sum to {total} and meet the bounds {lo} / {hi}"
                )
        return [list(map(float, p)) for p in rw.points]
    if rw.grid_step is not None:
        try:
            return simplex_grid(rw.grid_step, lo, hi, total)
        except ValueError as e:
            raise SettingsError(f"reward_weights.grid_step: {e}") from e
    return []  # random / optuna: nothing to enumerate


def _candidates(spec: ParamSpec) -> list[Any]:
    if spec.values is not None:
        return list(spec.values)
    assert spec.low is not None and spec.high is not None
    lo, hi = spec.low, spec.high
    return [int(lo), int(hi)] if spec.integer else [lo, hi]


def _contains(spec: ParamSpec, value: Any) -> bool:
    if spec.values is not None:
        return any(_same(value, v) for v in spec.values)
    assert spec.low is not None and spec.high is not None
    return isinstance(value, int | float) and spec.low - EPS <= float(value) <= spec.high + EPS


def _domain(spec: ParamSpec, grid: bool) -> Any:
    if spec.values is not None:
        return tune.grid_search(list(spec.values)) if grid else tune.choice(list(spec.values))
    assert spec.low is not None and spec.high is not None
    if spec.integer:
        lo, hi = int(spec.low), int(spec.high) + 1  # Tune's integer upper bounds are exclusive
        return tune.lograndint(lo, hi) if spec.log else tune.randint(lo, hi)
    return tune.loguniform(spec.low, spec.high) if spec.log else tune.uniform(spec.low, spec.high)


def param_space(sweep: SweepSettings, space: SearchSpace, base_raw: dict[str, Any]) -> dict[str, Any]:
    """The Tune ``param_space`` of the sweep (grid searches or sampling domains)."""
    grid = sweep.searcher == "grid"
    out: dict[str, Any] = {p: _domain(sweep.params[p], grid) for p in space.params}
    if space.layers:
        if grid:
            points = _grid_points(sweep, list(space.lo), list(space.hi), space.total)
            out[WEIGHTS_KEY] = tune.grid_search([format_weights(space.layers, p) for p in points])
        else:
            out.update({unit_key(i): tune.uniform(0.0, 1.0) for i in range(len(space.layers) - 1)})
    return out


def default_point(sweep: SweepSettings, space: SearchSpace) -> dict[str, Any]:
    """The experiment's own values as a point of the param space (a searcher's ``points_to_evaluate``)."""
    point: dict[str, Any] = {p: space.defaults[p] for p in space.params}
    if space.layers:
        w = [float(space.defaults[weight_path(n)]) for n in space.layers]
        if sweep.searcher == "grid":
            point[WEIGHTS_KEY] = format_weights(space.layers, w)
        else:
            u = unit_cube_from_weights(w, space.lo, space.total)
            point.update({unit_key(i): x for i, x in enumerate(u)})
    return point
