"""Domain registry: built-in domains plus any package registered under the ``agentic_ray.domains`` entry points.

A third-party package adds a domain with no change here::

    # its pyproject.toml
    [project.entry-points."agentic_ray.domains"]
    warehouse = "my_pkg.warehouse:domain"     # an object implementing agentic_ray.domains.protocol.Domain

:func:`get_domain` returns the :class:`~agentic_ray.domains.protocol.Domain`; generic code never imports a
domain module by name. See :mod:`agentic_ray.domains.protocol` for what a domain is.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from agentic_ray.domains.protocol import Domain

__all__ = ["Domain", "available_domains", "get_domain", "register_domain", "sample_world"]

ENTRY_POINT_GROUP = "agentic_ray.domains"

_BUILTIN: dict[str, str] = {
    "ecommerce": "agentic_ray.domains.ecommerce:domain",
    "ecommerce_memory": "agentic_ray.domains.ecommerce_memory:domain",
    "helpdesk": "agentic_ray.domains.helpdesk:domain",
    "helpdesk_memory": "agentic_ray.domains.helpdesk_memory:domain",
    "inspection": "agentic_ray.domains.inspection:domain",
}
"""Built-in domains (also declared as entry points in pyproject.toml; listed here so a source checkout that was
not reinstalled still finds them)."""

_REGISTRY: dict[str, Callable[[], Domain]] = {}
_LOADED: dict[str, Domain] = {}


def _load(target: str) -> Domain:
    module, _, attr = target.partition(":")
    obj: Any = getattr(importlib.import_module(module), attr or "domain")
    d = obj() if callable(obj) and not isinstance(obj, Domain) else obj
    if not isinstance(d, Domain):
        raise TypeError(f"{target} is not an agentic_ray Domain (see agentic_ray.domains.protocol)")
    return d


def _discover() -> dict[str, Callable[[], Domain]]:
    found: dict[str, Callable[[], Domain]] = {n: functools.partial(_load, t) for n, t in _BUILTIN.items()}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, functools.partial(_load, ep.value))
    found.update(_REGISTRY)
    return found


def register_domain(name: str, factory: Callable[[], Domain]) -> None:
    """Register a domain in this process (tests, notebooks); installed packages use the entry-point group."""
    _REGISTRY[name] = factory
    _LOADED.pop(name, None)


def available_domains() -> list[str]:
    return sorted(_discover())


def get_domain(name: str) -> Domain:
    """The domain called ``name`` (loaded once per process).

    Raises:
        KeyError: unknown domain (the message lists the known ones).
    """
    if name in _LOADED:
        return _LOADED[name]
    factories = _discover()
    if name not in factories:
        raise KeyError(f"unknown domain {name!r}; known: {sorted(factories)}")
    d = factories[name]()
    if d.name != name:
        raise ValueError(f"domain registered as {name!r} calls itself {d.name!r}")
    _LOADED[name] = d
    return d


def sample_world(domain: Domain, seed: int = 0) -> Any:
    """A world of the domain's first family (for hosting tools without an env, e.g. ``agentic-ray skills serve``)."""
    return domain.make_task(domain.families[0], seed)[0]
