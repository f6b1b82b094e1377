"""The e-commerce customer-service domain: a simulated shop world and its thirteen tools."""

from __future__ import annotations

from agentic_ray.skills.domains.ecommerce.world import ShopWorld, make_world

__all__ = ["ShopWorld", "make_world"]
