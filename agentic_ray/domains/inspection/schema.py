"""The inspection graph schema: what the agent can know about parts, as node features.

A part node is multimodal (seed 000's hierarchical state): the camera frame the listing returns (an image field,
downsampled to :data:`THUMBNAIL` pixels a side, with the focus mask the detector's reported boxes draw), the serial
the OCR read (a text field of :data:`SERIAL_TOKENS` tokens) and the structured fields. The request's text is the
fusion's query (``task_text_tokens``)."""

from __future__ import annotations

from agentic_ray.domains.inspection.world import FINDINGS
from agentic_ray.domains.protocol import DomainSchema, EntityTypeSchema, FieldSpec

THUMBNAIL = 16
"""Side of the part image in the observation (the 64x64 frame averaged over 4x4 blocks)."""
SERIAL_TOKENS = 8
TASK_TEXT_TOKENS = 24
MAX_PARTS = 6
"""Most parts one episode reveals (a line holds at most five; one spare for a disputed part)."""

SCHEMA = DomainSchema(
    entity_types=(
        EntityTypeSchema(
            "part",
            MAX_PARTS,
            (
                FieldSpec("contrast", "number"),  # the camera's contrast on this part's image (listing)
                FieldSpec(
                    "frame", "image", size=THUMBNAIL
                ),  # listing, detect: the frame; detect: its focus mask
                FieldSpec("image_ok", "flag"),  # detect: the frame is usable
                FieldSpec("n_cracks", "number"),  # detect: cracks reported at the call's parameters
                FieldSpec("n_scratches", "number"),
                FieldSpec("crack_severity", "number"),  # detect: the worst reported crack's severity
                FieldSpec("severity_rank", "number"),  # rank_topk: place by reported severity
                FieldSpec("in_top_k", "flag"),
                FieldSpec("checksum_ok", "flag"),  # ocr_extract: the read serial's check character holds
                FieldSpec("manifest_match", "flag"),  # ocr_extract: it equals the shipping manifest's
                FieldSpec("serial", "text", size=SERIAL_TOKENS),  # ocr_extract: the serial as read
                FieldSpec("finding", "category", FINDINGS),  # db_update: what is recorded
            ),
        ),
    ),
    max_goals=8,
    terminal_skills=("inspector.handoff",),
    task_text_tokens=TASK_TEXT_TOKENS,
)
