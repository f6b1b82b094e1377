"""Shared test helpers (small real envs, not mocks)."""
