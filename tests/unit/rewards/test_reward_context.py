"""A domain declares the case facts its reward layers receive; a layer whose facts it does not give is off for that
domain (one warning), never fed zeros."""

from __future__ import annotations

import logging

import pytest

from agentic_ray.domains import get_domain
from agentic_ray.rewards import reward_pool_config
from agentic_ray.rewards.layers import LAYER_CLASSES
from agentic_ray.settings import ExperimentSettings

CUSTOMER_LAYERS = {"user_experience", "long_term_value"}
CALL_OUTCOME_LAYERS = {
    "detection_f1",
    "detection_quality",
    "localisation_iou",
    "ranking_ndcg",
    "record_credit",
}
"""Layers over what a domain's detection, ranking or record tools returned (the inspection domain's); off by
default."""
OFF_BY_DEFAULT = CALL_OUTCOME_LAYERS | {"memory"}
"""The layers off unless a config enables them (``memory``: the L4 layer over an episode's memory facts)."""

SPARSE_BASELINE = {"task_outcome"}
"""Off unless a config enables it, and reading no case facts: seed 000's sparse end-of-task reward."""


def _settings(domain: str) -> ExperimentSettings:
    return ExperimentSettings.model_validate({"env": {"domain": domain}, "rewards": {"mode": "async"}})


def test_layers_declare_the_facts_they_read() -> None:
    assert {n for n, c in LAYER_CLASSES.items() if c.context_inputs} == CUSTOMER_LAYERS | OFF_BY_DEFAULT


def test_a_domain_without_customer_facts_gets_no_customer_layers_and_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(reward_pool_config, "_REPORTED_OFF", set())
    with caplog.at_level(logging.WARNING, logger=reward_pool_config.__name__):
        s = _settings("helpdesk")
        _settings("helpdesk")  # validated again: no second warning
    assert s.rewards is not None
    off = CUSTOMER_LAYERS | OFF_BY_DEFAULT | SPARSE_BASELINE
    assert set(s.rewards.layers) - set(s.rewards.enabled_layers()) == off
    assert all(not LAYER_CLASSES[n].enabled_by_default for n in OFF_BY_DEFAULT | SPARSE_BASELINE)
    lines = [r.getMessage() for r in caplog.records if "is off for domain helpdesk" in r.getMessage()]
    assert len(lines) == len(CUSTOMER_LAYERS), lines
    assert any("user_experience" in line and "customer_complaint_rate" in line for line in lines)


def test_a_domain_that_gives_the_facts_keeps_every_layer(caplog: pytest.LogCaptureFixture) -> None:
    d = get_domain("ecommerce")
    needed = {k for n in CUSTOMER_LAYERS for k in LAYER_CLASSES[n].context_inputs}
    assert needed <= set(d.reward_context_keys)
    world, _task = d.make_task(d.families[0], 0)
    assert set(d.reward_context(world)) == set(d.reward_context_keys)
    s = _settings("ecommerce")
    assert s.rewards is not None and set(s.rewards.enabled_layers()) >= CUSTOMER_LAYERS


def test_every_domain_gives_exactly_what_it_declares() -> None:
    for name in ("ecommerce", "helpdesk", "inspection"):
        d = get_domain(name)
        world, _task = d.make_task(d.families[0], 1)
        assert set(d.reward_context(world)) == set(d.reward_context_keys), name
