"""A fixed model parses the same text the same way, also after a save and load."""

from __future__ import annotations

from agentic_ray.parser.goal_parser import GoalParser

TEXT = "Hi! I'm Zhao Lei, zip 610041. Order O5551234 came with the wrong item, I ordered SKU4321."


def test_parse_is_deterministic_and_survives_save_and_load(ecommerce_parser, tmp_path) -> None:
    a = ecommerce_parser.parse(TEXT, [])
    b = ecommerce_parser.parse(TEXT, [])
    assert a == b
    assert a.clarify is None and a.families == ("wrong_item_exchange",)
    assert {(m.type, m.id) for m in a.mentioned} == {("order", "O5551234"), ("product", "SKU4321")}
    ecommerce_parser.save(tmp_path)
    c = GoalParser.load(tmp_path).parse(TEXT, [])
    assert c == a
