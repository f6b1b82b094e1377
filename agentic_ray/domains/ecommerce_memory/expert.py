"""The scripted expert of the shop's memory tasks: the e-commerce expert, writing to memory what the customer means
as the conversation goes, and recalling it when the observation no longer says which order that is
(:func:`~agentic_ray.memory.memory_expert.memory_step`; a search replaces the listing of the customer's orders).
The rest is the e-commerce expert's plan (after a failed search too).
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.ecommerce.expert import EcommerceExpert
from agentic_ray.domains.ecommerce_memory.tasks import RECALL_FACT
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.memory.memory_expert import memory_step

LISTING = ("order.list",)
"""The e-commerce expert's listing of the customer's orders (a memory search replaces it)."""


class ShopMemoryExpert(EcommerceExpert):
    """Optimal scripted policy for the shop's memory families (see the module docstring)."""

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        return memory_step(view, super().plan(view), LISTING, RECALL_FACT)
