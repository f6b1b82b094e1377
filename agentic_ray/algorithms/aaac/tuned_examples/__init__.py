"""Tuned AAAC examples on public benchmarks; each doubles as a learning test (RLlib's ``tuned_examples`` habit)."""
