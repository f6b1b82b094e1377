"""Requests in the customer's words (issue 28): the request models, ``/v1/act`` and agent mode from text through
the domain's shipped goal parser, the typed clarification, and the parse in the stored trace and the metrics."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from agentic_ray.domains import get_domain
from agentic_ray.parser import load_parser
from agentic_ray.serving.request_check import ClientError
from agentic_ray.serving.schemas import MAX_TEXT_CHARS, ActRequest, SessionCreate, TaskIn
from agentic_ray.serving.text_requests import TextParser
from tests.helpers.serving import AUTH

DOMAIN = get_domain("ecommerce")
FAMILY, SEED = "address_error", 3  # order O1713810 of Li Wei, zip 361001, to a parcel locker
ADDRESS = "The address on order O1713810 is wrong, please send it to a parcel locker."
WHO = "I'm Li Wei, zip 361001."
JSON = {**AUTH, "content-type": "application/json"}


@pytest.fixture(scope="module")
def app(shared_app):
    svc, c = shared_app
    asyncio.run(
        svc.text.parser()
    )  # the parser and its embedder load once per replica (here, outside the tests)
    return svc, c


def act_text(text: str, history: list[str] | None = None, **request) -> dict:
    return {"domain": "ecommerce", "task": {"request": {"text": text, "history": history or [], **request}}}


def stored(svc, trace_id: str) -> tuple[str, dict, dict]:
    """``(kind, request, decision)`` of a stored decision."""
    svc.store.flush()
    row = svc.store._con.execute(
        "SELECT kind, request, decision FROM decisions WHERE trace_id = ?", (trace_id,)
    ).fetchone()
    return row[0], json.loads(row[1]), json.loads(row[2])


# ---------------------------------------------------------------------------------------------------- models
def test_request_models_take_text_instead_of_goals_and_bound_it():
    t = TaskIn.model_validate({"request": {"text": ADDRESS, "history": ["Hi."]}})
    assert t.goals == [] and t.request.history == ["Hi."]
    with pytest.raises(ValidationError, match="goal parser"):
        TaskIn.model_validate({"request": {"text": "   "}})  # neither goals nor words
    with pytest.raises(ValidationError, match=f"at most {MAX_TEXT_CHARS} characters"):
        TaskIn.model_validate({"request": {"text": "x" * (MAX_TEXT_CHARS + 1)}})
    with pytest.raises(ValidationError, match="at most 16 items"):
        TaskIn.model_validate({"request": {"text": ADDRESS, "history": ["a"] * 17}})
    with pytest.raises(
        ValidationError, match="unicode string"
    ):  # a Python caller's str; JSON's is refused too
        TaskIn.model_validate({"request": {"text": "a\ud800b"}})
    s = SessionCreate.model_validate({"domain": "ecommerce", "text": ADDRESS, "seed": 3})
    assert s.text == ADDRESS and s.family is None
    for history in (["hi"], []):  # the schema says it too (if history then text), for clients and fuzzers
        with pytest.raises(ValidationError, match="only read with text"):
            SessionCreate.model_validate({"domain": "ecommerce", "history": history})
    rule = SessionCreate.model_json_schema()
    assert rule["if"] == {"required": ["history"]} and rule["then"]["required"] == ["text"]


# ---------------------------------------------------------------------------------------------------- /v1/act
def test_act_from_text_decides_on_the_parsed_goal_dag(app):
    svc, c = app
    r = c.post("/v1/act", json=act_text(f"{ADDRESS} {WHO}"), headers=AUTH)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["kind"] == "decision" and d["valid"], d
    p = d["parsed"]
    want = load_parser("ecommerce").parse(f"{ADDRESS} {WHO}")
    assert [(g["id"], g["skill"], tuple(g["deps"]), g["args"]) for g in p["goals"]] == [
        (g.id, g.skill, g.deps, g.args) for g in want.goals
    ]
    assert p["families"] == [FAMILY] and p["facts"] == {"name": "Li Wei", "zip": "361001"}
    assert p["mentioned"] == [{"type": "order", "id": "O1713810"}] and p["parse_ms"] > 0
    order = next(s for s in p["slots"] if s["slot"] == "order")
    assert ADDRESS[order["start"] : order["end"]] == "O1713810"
    # the decision is the one the structured goal the parser read would get
    task = {
        "request": {"text": f"{ADDRESS} {WHO}", "facts": p["facts"], "mentioned": p["mentioned"]},
        "goals": [{k: v for k, v in g.items()} for g in p["goals"]],
        "family": FAMILY,
    }
    same = c.post("/v1/act", json={"domain": "ecommerce", "task": task}, headers=AUTH).json()
    assert (same["skill"], same["arguments"], same["parsed"]) == (d["skill"], d["arguments"], None)
    kind, _req, dec = stored(svc, d["trace_id"])
    assert kind == "act" and dec["parsed"]["parse_ms"] == p["parse_ms"]  # the parse is in the stored trace


def test_a_missing_order_id_is_a_clarify_not_a_guess(app):
    svc, c = app
    r = c.post(
        "/v1/act",
        json=act_text(f"The address on my order is wrong, please send it to a parcel locker. {WHO}"),
        headers=AUTH,
    )
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["kind"] == "clarify" and "skill" not in d
    assert d["clarify"]["reason"] == "missing_slots" and d["clarify"]["missing"] == ["order"]
    assert d["clarify"]["families"] == [FAMILY] and d["parsed"]["goals"] == []
    kind, req, dec = stored(svc, d["trace_id"])
    assert kind == "clarify" and dec == d and req["task"]["goals"] == []


def test_a_missing_identity_is_a_clarify_naming_the_ways_to_give_it(app):
    _svc, c = app
    d = c.post("/v1/act", json=act_text(ADDRESS), headers=AUTH).json()
    assert d["kind"] == "clarify" and d["clarify"]["missing"] == ["email"]
    assert sorted(d["clarify"]["identity_options"]) == [["email"], ["name", "zip"]]
    # the identity said in an earlier turn, or held by the client as facts, completes the request
    d = c.post("/v1/act", json=act_text(ADDRESS, history=[f"Hello. {WHO}"]), headers=AUTH).json()
    assert d["kind"] == "decision" and d["parsed"]["facts"] == {"name": "Li Wei", "zip": "361001"}
    d = c.post("/v1/act", json=act_text(ADDRESS, facts={"email": "li@example.com"}), headers=AUTH).json()
    assert d["kind"] == "decision" and d["parsed"]["facts"] == {"email": "li@example.com"}
    # a fact the client holds with several values is said, and answered as a list (a 500 before: schemathesis)
    two = {"email": ["li@example.com", "wei@example.com"]}
    r = c.post("/v1/act", json=act_text("Where is my package?", facts=two), headers=AUTH)
    assert r.status_code == 200 and r.json()["parsed"]["facts"] == two, r.text[:300]


def test_an_unknown_family_is_refused_before_the_text_is_read(app):
    _svc, c = app
    body = {"domain": "ecommerce", "family": "AAA", "text": ""}
    for path in ("/v1/sessions", "/v1/episodes"):
        r = c.post(path, json=body, headers=AUTH)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "family", (path, r.text[:300])


def test_hostile_text_is_a_4xx_or_a_clarify_never_a_5xx(app):
    _svc, c = app
    over = c.post("/v1/act", json=act_text("x" * (MAX_TEXT_CHARS + 1)), headers=AUTH)
    assert over.status_code == 422 and over.json()["detail"][0]["loc"][-1] == "text"
    surrogate = json.dumps(act_text("refund \ud800 order O1713810"))  # ASCII JSON with a lone surrogate
    assert c.post("/v1/act", content=surrogate, headers=JSON).status_code == 422
    assert c.post("/v1/act", json=act_text("\n\t\r "), headers=AUTH).status_code == 422  # no words, no goals
    for text in ("\x00\x01\x02\x7f", "🙂" * 1000, "O1713810 " * 400, "ß∂ƒ©˙∆˚¬…"):
        r = c.post("/v1/act", json=act_text(text), headers=AUTH)
        assert r.status_code == 200 and r.json()["kind"] == "clarify", (
            text[:20],
            r.status_code,
            r.text[:200],
        )


# ---------------------------------------------------------------------------------------------------- agent mode
def test_a_session_from_text_runs_the_parsed_task_in_the_seeds_world(app):
    svc, c = app
    r = c.post(
        "/v1/sessions", json={"domain": "ecommerce", "text": f"{ADDRESS} {WHO}", "seed": SEED}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["family"] == FAMILY and s["parsed"]["families"] == [FAMILY]
    env = svc.sessions.open[s["session_id"]].env
    assert [g.id for g in env.task.goals] == s["goals"] == [g["id"] for g in s["parsed"]["goals"]]
    assert env.task.request.text == f"{ADDRESS} {WHO}" and env.task.request.facts == {
        "name": "Li Wei",
        "zip": "361001",
    }
    step = c.post(f"/v1/sessions/{s['session_id']}/step", headers=AUTH).json()
    assert step["t"] == 0 and step["skill"]
    c.delete(f"/v1/sessions/{s['session_id']}", headers=AUTH)
    kind, req, dec = stored(svc, s["session_id"])
    assert kind == "episode" and req["text"] == f"{ADDRESS} {WHO}" and dec["parsed"] == s["parsed"]
    # words about another task than the world's (family, seed) are a 422 naming the text
    body = {"domain": "ecommerce", "text": f"{ADDRESS} {WHO}", "family": "cancellation", "seed": SEED}
    r = c.post("/v1/sessions", json=body, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "text"], r.text


def test_an_episode_from_unsure_text_streams_one_clarify_and_starts_nothing(app):
    svc, c = app
    before = len(svc.sessions.open)
    r = c.post("/v1/episodes", json={"domain": "ecommerce", "text": ADDRESS}, headers=AUTH)
    assert r.status_code == 200
    (block,) = [b for b in r.text.split("\n\n") if b.strip()]
    event, data = (line.split(": ", 1)[1] for line in block.splitlines())
    assert event == "clarify" and json.loads(data)["clarify"]["missing"] == ["email"]
    assert len(svc.sessions.open) == before


def test_metrics_count_parses_and_clarifications_with_the_parse_time(app):
    _svc, c = app
    m0 = c.get("/v1/metrics", headers=AUTH).json()["parser"]
    c.post("/v1/act", json=act_text(ADDRESS), headers=AUTH)  # a clarify
    c.post("/v1/act", json=act_text(f"{ADDRESS} {WHO}"), headers=AUTH)  # a decision
    m = c.get("/v1/metrics", headers=AUTH).json()["parser"]
    assert m["loaded"] and m["parses"] == m0["parses"] + 2
    assert m["clarify"] == m0["clarify"] + 1 and m["clarify_missing_slots"] == m0["clarify_missing_slots"] + 1
    assert m["parse_ms"]["count"] == m["parses"] and 0 < m["parse_ms"]["p50"] <= m["parse_ms"]["p99"]


def test_openapi_documents_text_requests_and_the_clarify_answer(app):
    _svc, c = app
    schema = c.get("/openapi.json", headers=AUTH).json()
    s = schema["components"]["schemas"]
    assert s["RequestIn"]["properties"]["text"]["maxLength"] == MAX_TEXT_CHARS
    assert s["RequestIn"]["properties"]["history"]["maxItems"] == 16
    ok = schema["paths"]["/v1/act"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert {x["$ref"].rsplit("/", 1)[1] for x in ok["anyOf"]} == {"ActResponse", "ClarifyResponse"}
    assert s["ClarifyOut"]["properties"]["missing"]["type"] == "array"
    assert "text" in s["SessionCreate"]["properties"] and ActRequest.model_fields["task"]


def test_a_domain_without_a_parser_answers_422(tmp_path):
    tp = TextParser("ecommerce", folder=str(tmp_path))
    with pytest.raises(ClientError, match="no goal parser") as e:
        asyncio.run(tp.parse(ADDRESS))
    assert e.value.status == 422 and not tp.summary()["loaded"]
    tp.close()


def test_the_serving_docs_text_requests_answer_as_documented(app):
    """The bodies of the text block in docs/concepts/serving.md (not run by the README command test: it needs a
    served run) get a decision and a streamed episode."""
    from tests.helpers.readme import REPO

    doc = (REPO / "docs" / "concepts" / "serving.md").read_text()
    block = (
        doc.split("The customer's words instead of a goal", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    )
    act, episode = (json.loads(b.split("'", 1)[0]) for b in block.split("-d '")[1:])
    _svc, c = app
    d = c.post("/v1/act", json=act, headers=AUTH).json()
    assert d["kind"] == "decision" and d["parsed"]["facts"] == {"name": "Li Wei", "zip": "361001"}, d
    r = c.post("/v1/episodes", json=episode, headers=AUTH)
    events = [b.split("\n") for b in r.text.strip().split("\n\n")]
    assert events[0][0] == "event: session" and json.loads(events[0][1][6:])["family"] == FAMILY
    assert events[-1][0] == "event: step" and json.loads(events[-1][1][6:])["done"]
