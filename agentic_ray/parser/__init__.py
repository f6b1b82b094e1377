"""The goal parser: customer text (and history) to a goal DAG, facts and entities, offline and small (issue 28).

``parse(text, history, domain)`` uses the domain's shipped parser; ``agentic-ray parser train --domain NAME``
builds one for any registered domain that ships renderings (:mod:`agentic_ray.domains.rendering`). This package
names no domain.
"""

from agentic_ray.parser.goal_parser import GoalParser, load_parser, parse
from agentic_ray.parser.parsed_request import Clarify, ParsedRequest, SlotSpan

__all__ = ["Clarify", "GoalParser", "ParsedRequest", "SlotSpan", "load_parser", "parse"]
