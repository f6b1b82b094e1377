"""The shipped parsers on renderings built from templates training never saw: family accuracy, slot F1 and exact
goal-DAG match, each with a margin no trivial parser reaches (a majority-family parser scores at most 1/5 family
accuracy here, and a parser that finds no slots has F1 0)."""

from __future__ import annotations

from agentic_ray.domains import get_domain
from agentic_ray.parser.evaluation import evaluate
from agentic_ray.parser.train import domain_renderings


def test_heldout_family_slots_and_dag(shipped) -> None:
    parser, examples = shipped
    rend = domain_renderings(get_domain(parser.domain))
    r = evaluate(parser, examples, rend)
    assert r.n >= 30
    detail = "\n".join(r.failures)
    assert r.family_acc >= 0.93, (r, detail)
    assert r.slot_f1 >= 0.96, (r, detail)
    assert r.dag_exact >= 0.9, (r, detail)
    assert r.clarify_rate <= 0.1, (r, detail)


def test_composite_requests_keep_their_order_and_entities(ecommerce_parser) -> None:
    text = (
        "Hello, my email is li.12345@example.com. Both clothing items in order O1111111 are faulty, I am "
        "sending them back. Also, my parcel for order O2222222 has been stuck for days."
    )
    p = ecommerce_parser.parse(text, [])
    assert p.clarify is None, p.clarify
    assert p.families == ("multi_item_return", "logistics_exception")
    assert p.family == "composite"
    by_id = {g.id: g for g in p.goals}
    assert by_id["a.return"].args["order_id"] == "O1111111"
    assert by_id["a.return"].hints == {"category": "apparel"}
    assert by_id["a.return"].priority == 12  # the first request raised goes first
    assert by_id["b.express"].args == {"order_id": "O2222222", "action": "trace"}
    assert by_id["b.waybill"].deps == ("b.express",)
