"""The help-desk graph schema: what the agent can know about employees, tickets and assets, as node features."""

from __future__ import annotations

from agentic_ray.domains.helpdesk.world import (
    ACCOUNT_STATUSES,
    ASSET_KINDS,
    ASSET_STATUSES,
    DEPARTMENTS,
    PRIORITIES,
    TICKET_CATEGORIES,
    TICKET_STATUSES,
)
from agentic_ray.domains.protocol import DomainSchema, EntityTypeSchema, FieldSpec, LinkSchema

SCHEMA = DomainSchema(
    entity_types=(
        EntityTypeSchema(
            "employee",
            2,
            (
                FieldSpec("dept", "category", DEPARTMENTS),
                FieldSpec("status", "category", ACCOUNT_STATUSES),
                FieldSpec("verified", "flag"),
                FieldSpec("mfa_enrolled", "flag"),
                FieldSpec("tenure_years", "number"),
                FieldSpec("open_tickets", "number"),
            ),
        ),
        EntityTypeSchema(
            "ticket",
            8,
            (
                FieldSpec("status", "category", TICKET_STATUSES),
                FieldSpec("category", "category", TICKET_CATEGORIES),
                FieldSpec("priority", "category", PRIORITIES),
                FieldSpec("age_hours", "number"),
            ),
        ),
        EntityTypeSchema(
            "asset",
            4,
            (
                FieldSpec("kind", "category", ASSET_KINDS),
                FieldSpec("status", "category", ASSET_STATUSES),
                FieldSpec("warranty_days_left", "number", copy=True),
                FieldSpec("cost", "number"),
            ),
        ),
    ),
    links=(
        LinkSchema("employee", "reported", "ticket", "tickets", 8),
        LinkSchema("employee", "holds", "asset", "assets", 4),
        LinkSchema("ticket", "reported_by", "employee", "reporter", 8),
        LinkSchema("ticket", "concerns", "asset", "asset", 8),
        LinkSchema("asset", "owned_by", "employee", "owner", 4),
    ),
    goal_hints=(
        FieldSpec("kind", "category", ASSET_KINDS),
        FieldSpec("category", "category", TICKET_CATEGORIES),
    ),
    max_goals=4,
    terminal_skills=("escalate_to_tier2", "answer_warranty"),
)
