"""Text utilities shared by the memory and the goal parser: sentence embeddings from a model shipped in a wheel."""

from agentic_ray.text.embedder import SentenceEmbedder, get_embedder

__all__ = ["SentenceEmbedder", "get_embedder"]
