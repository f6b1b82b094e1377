"""Domain registry: what a generic host (``agentic-ray skills serve/check``, envs) needs to run a domain.

A domain is a contract file plus a world type. :func:`get_domain` returns a :class:`Domain` with the contract
path, a seeded world factory and the JSON deserialiser of its world, so a host never imports domain modules by
name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.skills.contracts import domain_file


@dataclass(frozen=True)
class Domain:
    """A registered domain.

    Attributes:
        name: domain name, e.g. ``ecommerce``.
        contracts_path: its skill contract YAML.
        world_from_dict: rebuilds a world from ``world.to_dict()`` JSON.
        make_world_fn: ``rng -> world``.
    """

    name: str
    contracts_path: Path
    world_from_dict: Callable[[dict[str, Any]], Any]
    make_world_fn: Callable[[np.random.Generator], Any]

    def make_world(self, seed: int | None = None) -> Any:
        """A fresh world drawn with ``np.random.default_rng(seed)``."""
        return self.make_world_fn(np.random.default_rng(seed))


def _ecommerce() -> Domain:
    from agentic_ray.skills.domains.ecommerce.world import ShopWorld, make_world

    return Domain("ecommerce", domain_file("ecommerce"), ShopWorld.from_dict, make_world)


_REGISTRY: dict[str, Callable[[], Domain]] = {"ecommerce": _ecommerce}


def register_domain(name: str, factory: Callable[[], Domain]) -> None:
    """Add a domain (a third domain needs no change to training code, only this call)."""
    _REGISTRY[name] = factory


def available_domains() -> list[str]:
    return sorted(_REGISTRY)


def get_domain(name: str) -> Domain:
    """The registered domain called ``name``.

    Raises:
        KeyError: unknown domain (the message lists the known ones).
    """
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown domain {name!r}; known: {available_domains()}") from None
