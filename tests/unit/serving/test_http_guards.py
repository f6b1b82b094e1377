"""Auth, body limit and trace ids of the ASGI guard, on a bare Starlette app (no Ray, no service)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from agentic_ray.serving.http_guards import GuardMiddleware, load_token
from agentic_ray.serving.settings import AuthSettings

TOKEN = "s3cret-" + "k" * 20


@pytest.fixture
def client():
    app = FastAPI()
    seen: list[tuple[str, int]] = []

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        body = await request.body()
        return {"n": len(body), "trace": request.scope["state"]["trace_id"]}

    @app.get("/healthz")
    async def health() -> dict:
        return {"ok": True}

    app.add_middleware(
        GuardMiddleware,
        token=lambda: TOKEN,
        max_body_bytes=lambda: 100,
        on_response=lambda r, s, ms: seen.append((r, s)),
    )
    return TestClient(app), seen


def test_bearer_token_is_required_except_for_health(client):
    c, seen = client
    ok = {"Authorization": f"Bearer {TOKEN}"}
    assert c.get("/healthz").status_code == 200
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": TOKEN},
        {"Authorization": f"Token {TOKEN}"},
    ):
        r = c.post("/echo", content=b"{}", headers=headers)
        assert r.status_code == 401 and r.json()["trace_id"] == r.headers["x-trace-id"]
    r = c.post("/echo", content=b"abc", headers=ok)
    assert r.status_code == 200 and r.json() == {"n": 3, "trace": r.headers["x-trace-id"]}
    assert ("other", 401) in seen and ("/healthz", 200) in seen


def test_bodies_over_the_limit_get_413_declared_or_streamed(client):
    c, _ = client
    ok = {"Authorization": f"Bearer {TOKEN}"}
    assert c.post("/echo", content=b"x" * 100, headers=ok).json()["n"] == 100
    assert c.post("/echo", content=b"x" * 101, headers=ok).status_code == 413

    def chunks():
        yield b"x" * 60
        yield b"x" * 60

    assert c.post("/echo", content=chunks(), headers=ok).status_code == 413


def test_token_comes_from_env_or_file_and_must_be_long(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", TOKEN)
    assert load_token(AuthSettings(token_env="MY_TOKEN")) == TOKEN
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    assert load_token(AuthSettings(token_file=str(f))) == TOKEN
    monkeypatch.setenv("MY_TOKEN", "short")
    with pytest.raises(ValueError, match="at least 16"):
        load_token(AuthSettings(token_env="MY_TOKEN"))
    monkeypatch.delenv("MY_TOKEN")
    with pytest.raises(ValueError, match="MY_TOKEN"):
        load_token(AuthSettings(token_env="MY_TOKEN"))
