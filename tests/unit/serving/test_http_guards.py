"""Auth, per-client request rates, body and nesting limits, trace ids and the cancelled-request status of the
ASGI guard, on a bare FastAPI app (no Ray, no service)."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from agentic_ray.serving.http_guards import GuardMiddleware, json_depth_problem, load_clients
from agentic_ray.serving.quotas import RequestRate
from agentic_ray.serving.settings import AuthSettings

TOKEN = "s3cret-" + "k" * 20
OTHER = "other-" + "z" * 20


class Clock:
    """Seconds; each reading advances by ``step`` (10 s: every request finds a full bucket, unless a test sets 0)."""

    def __init__(self) -> None:
        self.t = 0.0
        self.step = 10.0

    def __call__(self) -> float:
        self.t += self.step
        return self.t


@pytest.fixture
def client():
    app = FastAPI()
    seen: list[tuple[str, int]] = []
    clock = Clock()
    rate = RequestRate(rate=2.0, burst=3, clock=clock)

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        body = await request.body()
        state = request.scope["state"]
        return {"n": len(body), "trace": state["trace_id"], "client": state["client"]}

    @app.get("/healthz")
    async def health() -> dict:
        return {"ok": True}

    app.add_middleware(
        GuardMiddleware,
        clients=lambda: {TOKEN: "alice", OTHER: "bob"},
        max_body_bytes=lambda: 100,
        max_json_depth=lambda: 4,
        admit=rate.admit,
        on_response=lambda r, s, ms: seen.append((r, s)),
    )
    return TestClient(app), seen, clock


def test_bearer_token_is_required_except_for_health_and_names_the_client(client):
    c, seen, _clock = client
    assert c.get("/healthz").status_code == 200
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": TOKEN},
        {"Authorization": f"Token {TOKEN}"},
    ):
        r = c.post("/echo", content=b"{}", headers=headers)
        assert r.status_code == 401 and r.json()["trace_id"] == r.headers["x-trace-id"]
        assert r.headers["www-authenticate"] == "Bearer"
    r = c.post(
        "/echo", content=b"abc", headers={"Authorization": f"Bearer {TOKEN}", "content-type": "text/plain"}
    )
    assert r.status_code == 200 and r.json() == {"n": 3, "trace": r.headers["x-trace-id"], "client": "alice"}
    assert (
        c.post("/echo", content=b"{}", headers={"Authorization": f"Bearer {OTHER}"}).json()["client"] == "bob"
    )
    assert ("other", 401) in seen and ("/healthz", 200) in seen


def test_each_client_has_its_own_request_rate_and_a_429_says_when_to_retry(client):
    c, _seen, clock = client
    clock.step = 0.0
    alice, bob = {"Authorization": f"Bearer {TOKEN}"}, {"Authorization": f"Bearer {OTHER}"}
    assert [c.post("/echo", content=b"{}", headers=alice).status_code for _ in range(4)] == [
        200,
        200,
        200,
        429,
    ]
    r = c.post("/echo", content=b"{}", headers=alice)
    assert r.status_code == 429 and r.headers["retry-after"] == "1" and "quota" in r.json()["detail"]
    assert c.post("/echo", content=b"{}", headers=bob).status_code == 200  # bob is not held back by alice
    clock.t += 0.5  # one token back at 2/s
    assert c.post("/echo", content=b"{}", headers=alice).status_code == 200
    assert c.post("/echo", content=b"{}", headers=alice).status_code == 429


def test_bodies_over_the_limit_get_413_declared_or_streamed(client):
    c, _, _ = client
    ok = {"Authorization": f"Bearer {TOKEN}", "content-type": "text/plain"}
    assert c.post("/echo", content=b"x" * 100, headers=ok).json()["n"] == 100
    assert c.post("/echo", content=b"x" * 101, headers=ok).status_code == 413

    def chunks():
        yield b"x" * 60
        yield b"x" * 60

    assert c.post("/echo", content=chunks(), headers=ok).status_code == 413


def test_json_nested_past_the_limit_is_a_400_before_the_route_parses_it(client):
    c, _, _ = client
    ok = {"Authorization": f"Bearer {TOKEN}"}
    assert c.post("/echo", content=b'{"a": [[1]]}', headers=ok).status_code == 200  # 3 levels
    assert c.post("/echo", content=b'{"a": [[{"b": 1}]]}', headers=ok).status_code == 200  # 4 levels
    r = c.post("/echo", content=b'{"a": [[[{"b": 1}]]]}', headers=ok)
    assert r.status_code == 400 and r.json()["detail"] == "JSON nested deeper than 4 levels"
    # brackets inside strings are not nesting; a non-JSON content type is not parsed here
    assert c.post("/echo", content=b'{"a": "[[[[[[[["}', headers=ok).status_code == 200
    deep = b"[" * 50 + b"]" * 50
    assert c.post("/echo", content=deep, headers={**ok, "content-type": "text/plain"}).status_code == 200


def test_depth_check_handles_what_the_parser_cannot():
    assert json_depth_problem(b"[" * 100_000 + b"]" * 100_000, 32) == "JSON nested deeper than 32 levels"
    assert json_depth_problem(b"[" * 40, 32) is None  # not JSON: the route's parser answers it
    assert json_depth_problem(json.dumps({"a": [{"b": [1, 2]}] * 50}).encode(), 4) is None
    assert json_depth_problem(json.dumps({"a": [{"b": [[1]]}] * 50}).encode(), 4) is not None


def test_a_request_the_client_cancels_is_recorded_as_499_not_500():
    seen: list[tuple[str, int]] = []

    async def slow_app(scope, receive, send):
        await asyncio.sleep(10)

    guard = GuardMiddleware(
        slow_app,
        clients=lambda: {TOKEN: "alice"},
        max_body_bytes=lambda: 100,
        max_json_depth=lambda: 4,
        admit=lambda _c: None,
        on_response=lambda r, s, ms: seen.append((r, s)),
    )
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/act",
        "headers": [(b"authorization", f"Bearer {TOKEN}".encode())],
    }

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(_m):
        pass

    async def run() -> None:
        task = asyncio.create_task(guard(scope, receive, send))
        await asyncio.sleep(0.05)
        task.cancel()  # what Serve does to the handler when the HTTP client goes away
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert seen == [("/v1/act", 499)]


def test_tokens_come_from_env_or_a_file_of_clients_and_must_be_long(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", TOKEN)
    assert load_clients(AuthSettings(token_env="MY_TOKEN")) == {TOKEN: "default"}
    f = tmp_path / "tokens"
    f.write_text(f"# clients\nalice {TOKEN}\n{OTHER}  # unnamed\n\n")
    clients = load_clients(AuthSettings(token_file=str(f)))
    assert clients[TOKEN] == "alice" and clients[OTHER].startswith("client-") and OTHER not in clients[OTHER]
    f.write_text(TOKEN + "\n")  # the one-token file of before
    (only,) = load_clients(AuthSettings(token_file=str(f))).items()
    assert only[0] == TOKEN and only[1].startswith("client-")
    f.write_text(f"alice {TOKEN}\nalice {OTHER}\n")
    with pytest.raises(ValueError, match="given twice"):
        load_clients(AuthSettings(token_file=str(f)))
    f.write_text("alice short\n")
    with pytest.raises(ValueError, match="shorter than 16"):
        load_clients(AuthSettings(token_file=str(f)))
    monkeypatch.setenv("MY_TOKEN", "short")
    with pytest.raises(ValueError, match="shorter than 16"):
        load_clients(AuthSettings(token_env="MY_TOKEN"))
    monkeypatch.delenv("MY_TOKEN")
    with pytest.raises(ValueError, match="MY_TOKEN"):
        load_clients(AuthSettings(token_env="MY_TOKEN"))
