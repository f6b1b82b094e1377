"""The plug-in domain's graph schema: what the agent can know about a customer, payment methods, orders, items."""

from __future__ import annotations

from agentic_ray.domains.protocol import DomainSchema, EntityTypeSchema, FieldSpec, LinkSchema
from tests.plugin_domain.world import (
    CATEGORIES,
    ITEM_STATUSES,
    ORDER_STATUSES,
    PAYMENT_KINDS,
    QUESTIONS,
    TIERS,
)

MAX_ITEMS = 12
"""Three orders of at most four items (``RetailOptions.items_per_order``)."""

SCHEMA = DomainSchema(
    entity_types=(
        EntityTypeSchema("customer", 1, (FieldSpec("tier", "category", TIERS),)),
        EntityTypeSchema(
            "payment_method",
            3,
            (FieldSpec("kind", "category", PAYMENT_KINDS), FieldSpec("balance", "number")),
        ),
        EntityTypeSchema(
            "order",
            3,
            (
                FieldSpec("status", "category", ORDER_STATUSES),
                FieldSpec("total", "number"),
                FieldSpec("address", "text"),  # copied by update_address (`source: order.address`)
                FieldSpec("tracking", "text"),  # copied by answer_tracking
                *(
                    FieldSpec(q, "category", answers) for q, answers in QUESTIONS.items()
                ),  # ask_customer's answers
            ),
        ),
        EntityTypeSchema(
            "item",
            MAX_ITEMS,
            (
                FieldSpec("price", "number", copy=True),
                FieldSpec("status", "category", ITEM_STATUSES),
                FieldSpec("category", "category", CATEGORIES),
            ),
        ),
    ),
    links=(
        LinkSchema("customer", "pays_with", "payment_method", "payment_methods", 3),
        LinkSchema("customer", "placed", "order", "orders", 3),
        LinkSchema("order", "placed_by", "customer", "customer", 3),
        LinkSchema("order", "contains", "item", "items", MAX_ITEMS),
    ),
    goal_hints=(FieldSpec("category", "category", CATEGORIES), FieldSpec("kind", "category", PAYMENT_KINDS)),
    max_goals=3,
    terminal_skills=("close_case", "transfer_to_human"),
)
