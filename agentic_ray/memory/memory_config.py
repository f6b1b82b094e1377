"""Settings of the long-term memory: where the Qdrant store lives and how it is searched."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class MemoryConfig(BaseModel):
    """One long-term memory store. Embedded local mode (``path``) unless ``url`` names a Qdrant server."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(
        default=None,
        description="Folder of the embedded (local-mode) store, e.g. inside the run directory. Local mode allows "
        "one process per path: where several workers share it, one Ray actor owns it (memory_actor.py).",
    )
    url: str | None = Field(
        default=None, description="URL of a Qdrant server; when given, `path` must be unset."
    )
    collection: str = Field(default="memory", min_length=1, description="Qdrant collection name.")
    dim: int = Field(default=384, ge=1, description="Embedding width (all-MiniLM-L6-v2: 384).")
    exact_index: bool = Field(
        default=True,
        description="Local mode only: answer searches from an exact in-process index per customer "
        "(namespace_index.py) kept in step with the store; False queries qdrant-client's local engine.",
    )
    timeout_s: int = Field(default=10, ge=1, description="Server mode: request timeout.")

    @model_validator(mode="after")
    def _one_location(self) -> MemoryConfig:
        if self.path is not None and self.url is not None:
            raise ValueError("give `path` (embedded) or `url` (server), not both")
        return self
