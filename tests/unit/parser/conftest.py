"""Shared fixtures of the goal-parser tests: one shipped parser and one set of held-out renderings per domain and
session (the embedder loads once per process, about 7 s)."""

from __future__ import annotations

import pytest

from agentic_ray.domains import get_domain
from agentic_ray.parser.corpus import Example, render_corpus
from agentic_ray.parser.goal_parser import GoalParser, load_parser
from agentic_ray.parser.train import domain_renderings

DOMAINS = ("ecommerce", "helpdesk")
HELDOUT_PER_FAMILY = 6


@pytest.fixture(scope="session", params=DOMAINS)
def shipped(request: pytest.FixtureRequest) -> tuple[GoalParser, list[Example]]:
    """``(the domain's shipped parser, held-out examples)``."""
    d = get_domain(request.param)
    return load_parser(d.name), render_corpus(d, domain_renderings(d), HELDOUT_PER_FAMILY, "heldout", seed=1)


@pytest.fixture(scope="session")
def ecommerce_parser() -> GoalParser:
    return load_parser("ecommerce")
