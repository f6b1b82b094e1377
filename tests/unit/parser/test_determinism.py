"""A fixed model parses the same text the same way, also after a save and load."""

from __future__ import annotations

import numpy as np

from agentic_ray.parser.goal_parser import GoalParser
from agentic_ray.parser.slot_tagger import tokenize

TEXT = "Hi! I'm Zhao Lei, zip 610041. Order O5551234 came with the wrong item, I ordered SKU4321."
ENUM_TEXT = "The homeware item in order O1234567 arrived broken, send it to the pick-up locker."


def test_parse_is_deterministic_and_survives_save_and_load(ecommerce_parser, tmp_path) -> None:
    a = ecommerce_parser.parse(TEXT, [])
    b = ecommerce_parser.parse(TEXT, [])
    assert a == b
    assert a.clarify is None and a.families == ("wrong_item_exchange",)
    assert {(m.type, m.id) for m in a.mentioned} == {("order", "O5551234"), ("product", "SKU4321")}
    ecommerce_parser.save(tmp_path)
    again = GoalParser.load(tmp_path)
    assert again.parse(TEXT, []) == a
    words = [w for _, _, w in tokenize(ENUM_TEXT)]
    assert np.array_equal(again.tagger.token_probs(words), ecommerce_parser.tagger.token_probs(words))
    assert again.parse(ENUM_TEXT, []) == ecommerce_parser.parse(ENUM_TEXT, [])


def test_the_shipped_tagger_keeps_its_lexicon(ecommerce_parser) -> None:
    """The lexicon features need the phrases at parse time: a load that lost them would tag differently."""
    lex = ecommerce_parser.tagger.lexicon
    assert set(lex) == set(ecommerce_parser.value_phrases)
    for slot, values in ecommerce_parser.value_phrases.items():
        assert {p for ps in values.values() for p in ps} <= set(lex[slot])
