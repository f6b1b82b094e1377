"""The e-commerce graph schema: what the agent can know about users, orders and products, as node features."""

from __future__ import annotations

from agentic_ray.domains.ecommerce.world import CATEGORIES, DEVICES, ORDER_STATUSES, TRACKING_STATES
from agentic_ray.domains.protocol import DomainSchema, EntityTypeSchema, FieldSpec, LinkSchema

SCHEMA = DomainSchema(
    entity_types=(
        EntityTypeSchema(
            "user",
            1,
            (
                FieldSpec("level", "number"),
                FieldSpec("verified", "flag"),
                FieldSpec("complaint_rate", "number"),
                FieldSpec("balance", "number"),
                FieldSpec("device", "category", DEVICES),
            ),
        ),
        EntityTypeSchema(
            "order",
            4,
            (
                FieldSpec("status", "category", ORDER_STATUSES),
                FieldSpec("total", "number", copy=True),
                FieldSpec("refunded", "number"),
                FieldSpec("tracking", "category", TRACKING_STATES),
                FieldSpec("days_late", "number"),
                FieldSpec("shipping_fee", "number", copy=True),
                FieldSpec("placed_days_ago", "number"),
            ),
        ),
        EntityTypeSchema(
            "product",
            8,
            (
                FieldSpec("price", "number", copy=True),
                FieldSpec("category", "category", CATEGORIES),
                FieldSpec("stock", "number", copy=True),
                FieldSpec("in_stock", "flag"),
            ),
        ),
    ),
    links=(
        LinkSchema("order", "contains", "product", "items", 12),
        LinkSchema("order", "owned_by", "user", "user_id", 4),
        LinkSchema("user", "placed", "order", "orders", 4),
    ),
    goal_hints=(FieldSpec("category", "category", CATEGORIES),),
    max_goals=10,
    terminal_skills=("human.handoff", "answer.stock"),
)
