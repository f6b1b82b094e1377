"""The inspection graph schema: what the agent can know about parts, as node features."""

from __future__ import annotations

from agentic_ray.domains.inspection.world import FINDINGS
from agentic_ray.domains.protocol import DomainSchema, EntityTypeSchema, FieldSpec

MAX_PARTS = 6
"""Most parts one episode reveals (a line holds at most five; one spare for a disputed part)."""

SCHEMA = DomainSchema(
    entity_types=(
        EntityTypeSchema(
            "part",
            MAX_PARTS,
            (
                FieldSpec("contrast", "number"),  # the camera's contrast on this part's image (listing)
                FieldSpec("image_ok", "flag"),  # detect: the frame is usable
                FieldSpec("n_cracks", "number"),  # detect: cracks reported at the call's parameters
                FieldSpec("n_scratches", "number"),
                FieldSpec("crack_severity", "number"),  # detect: the worst reported crack's severity
                FieldSpec("severity_rank", "number"),  # rank_topk: place by reported severity
                FieldSpec("in_top_k", "flag"),
                FieldSpec("checksum_ok", "flag"),  # ocr_extract: the read serial's check character holds
                FieldSpec("manifest_match", "flag"),  # ocr_extract: it equals the shipping manifest's
                FieldSpec("finding", "category", FINDINGS),  # db_update: what is recorded
            ),
        ),
    ),
    max_goals=8,
    terminal_skills=("inspector.handoff",),
)
