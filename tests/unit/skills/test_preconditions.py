"""The one precondition check (executor, skill server, later the env mask) as a pure function, and its store."""

from __future__ import annotations

from agentic_ray.skills.preconditions import CallHistory, CallRecord, unmet_precondition
from tests.unit.skills import fixtures

REFUND = fixtures.contracts().by_name()["refund.pay"]  # after stock.check, where in_stock, same sku


def test_unmet_precondition_reads_skill_where_and_same():
    ok = CallRecord("stock.check", {"sku": "A"}, {"in_stock": True})
    assert unmet_precondition(REFUND, {"sku": "A"}, [ok]) is None
    why = unmet_precondition(REFUND, {"sku": "A"}, [])
    assert (
        why == "refund.pay requires a prior successful stock.check with {'in_stock': True} for the same sku"
    )
    assert unmet_precondition(REFUND, {"sku": "B"}, [ok]) is not None  # same: sku differs
    assert unmet_precondition(
        REFUND, {"sku": "A"}, [CallRecord("stock.check", {"sku": "A"}, {"in_stock": False})]
    )
    assert unmet_precondition(
        REFUND, {"sku": "A"}, [CallRecord("detect.run", {"sku": "A"}, {"in_stock": True})]
    )
    no_rules = fixtures.contracts().by_name()["stock.check"]
    assert unmet_precondition(no_rules, {"sku": "A"}, []) is None


def test_call_history_is_bounded_per_key_and_in_keys():
    h = CallHistory(max_keys=2, max_records=3)
    for i in range(5):
        h.record("a", CallRecord("s", {"i": i}, {}))
    assert [r.params["i"] for r in h.get("a")] == [2, 3, 4]
    h.record("b", CallRecord("s", {}, {}))
    h.record(("w", "i"), CallRecord("s", {}, {}))
    assert h.get("a") == [] and len(h.get("b")) == 1  # "a" was least recently used
    h.forget_where(lambda k: isinstance(k, tuple) and k[0] == "w")
    assert h.get(("w", "i")) == []
