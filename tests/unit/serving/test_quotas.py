"""Per-client limits: one token at its cap while another is still served, a Retry-After on every 429, and the
OpenAPI schema documenting every status each route can return (in-process service, no Ray)."""

from __future__ import annotations

import pytest

from tests.helpers.serving import make_service

ALICE = "alice-token-" + "a" * 20
BOB = "bob-token-" + "b" * 20
CAROL = "carol-token-" + "c" * 20


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def app(settings_dict, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\ncarol {CAROL}\n")
    svc, client = make_service(
        {
            **settings_dict,
            "auth": {"token_file": str(tokens)},
            "agent": {"max_sessions": 4, "session_ttl_s": 600},
            "quotas": {"sessions_per_client": 2, "requests_per_s": 1.0, "burst": 12},
        }
    )
    yield svc, client
    svc.close()


def test_one_client_at_its_session_cap_does_not_lock_out_another(app):
    """The probe's case: one token holder filled the whole session cap and everyone got 429 for 600 s."""
    svc, c = app
    new = {"domain": "ecommerce", "family": "stock_inquiry"}
    for _ in range(2):
        assert c.post("/v1/sessions", json=new, headers=bearer(ALICE)).status_code == 200
    for path in ("/v1/sessions", "/v1/episodes"):
        r = c.post(path, json=new, headers=bearer(ALICE))
        assert r.status_code == 429 and 590 <= int(r.headers["retry-after"]) <= 600, r.headers
        assert "this client holds 2 open sessions" in r.json()["detail"][0]["msg"]
    r = c.post("/v1/sessions", json=new, headers=bearer(BOB))
    assert r.status_code == 200
    assert c.post("/v1/episodes", json=new, headers=bearer(BOB)).status_code == 200  # runs, then closes
    assert c.post("/v1/sessions", json=new, headers=bearer(BOB)).status_code == 200
    # four open: the service's own cap now answers carol, also with a Retry-After
    r = c.post("/v1/sessions", json=new, headers=bearer(CAROL))
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert "4 sessions are open" in r.json()["detail"][0]["msg"]
    assert sorted(s.client for s in svc.sessions.open.values()) == ["alice", "alice", "bob", "bob"]
    alices = next(k for k, s in svc.sessions.open.items() if s.client == "alice")
    assert c.delete(f"/v1/sessions/{alices}", headers=bearer(BOB)).status_code == 404  # not bob's to close
    assert c.post(f"/v1/sessions/{alices}/step", headers=bearer(CAROL)).status_code == 404
    assert c.delete(f"/v1/sessions/{alices}", headers=bearer(ALICE)).status_code == 200
    assert c.post("/v1/sessions", json=new, headers=bearer(CAROL)).status_code == 200


def test_one_client_over_its_request_rate_does_not_slow_another(app):
    _svc, c = app
    statuses = [c.get("/v1/metrics", headers=bearer(ALICE)).status_code for _ in range(14)]
    assert statuses[:12] == [200] * 12 and statuses[12:] == [429, 429]
    r = c.post("/v1/act", json={}, headers=bearer(ALICE))
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert c.get("/v1/metrics", headers=bearer(BOB)).status_code == 200
    m = c.get("/v1/metrics", headers=bearer(BOB)).json()
    assert m["quota_refused"] == {"alice": 3} and m["requests"]["/v1/metrics 429"] == 2


def test_the_openapi_schema_documents_every_status_with_its_body(app):
    _svc, c = app
    spec = c.get("/openapi.json", headers=bearer(BOB)).json()
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "The service token.",
    }
    want = {
        ("post", "/v1/act"): {"200", "400", "401", "413", "422", "429"},
        ("post", "/v1/sessions"): {"200", "400", "401", "413", "422", "429"},
        ("post", "/v1/episodes"): {"200", "400", "401", "413", "422", "429"},
        ("post", "/v1/sessions/{session_id}/step"): {"200", "400", "401", "404", "409", "413", "422", "429"},
        ("delete", "/v1/sessions/{session_id}"): {"200", "401", "404", "409", "413", "422", "429"},
        ("post", "/v1/feedback"): {"200", "400", "401", "404", "413", "422", "429"},
        ("put", "/v1/strategy"): {"200", "400", "401", "413", "422", "429"},
        ("get", "/v1/metrics"): {"200", "401", "413", "429"},
        ("get", "/healthz"): {"200", "413"},
        ("get", "/readyz"): {"200", "413", "503"},
    }
    ops = {(m, p): op for p, item in spec["paths"].items() for m, op in item.items()}
    assert set(ops) == set(want)
    for key, statuses in want.items():
        op = ops[key]
        assert set(op["responses"]) == statuses, key
        for status, resp in op["responses"].items():
            content = resp.get("content", {})
            assert content and all("schema" in v for v in content.values()), (key, status)
        if "429" in statuses:
            assert op["responses"]["429"]["headers"]["Retry-After"]["schema"] == {"type": "integer"}
        assert op.get("security") == ([{"bearer": []}] if key[1] not in ("/healthz", "/readyz") else None)
    seed = spec["components"]["schemas"]["SessionCreate"]["properties"]["seed"]
    assert {"type": "integer", "minimum": 0, "exclusiveMaximum": 2**31} in seed["anyOf"]
