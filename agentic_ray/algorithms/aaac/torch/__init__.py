"""Torch implementation of the AAAC learner."""
