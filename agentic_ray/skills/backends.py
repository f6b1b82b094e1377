"""Skill backends: an in-process Python callable or a real HTTP service, behind one interface.

A domain's tools are plain functions ``handler(world, params) -> payload`` that mutate a domain *world* (a
simulated shop, a factory line). They signal failure by raising :class:`ToolError`. The same handler runs
in-process (:class:`PythonBackend`) or behind ``agentic-ray skills serve`` (:class:`HttpBackend`), with no code
change: the executor only sees :class:`RawOutcome`.

Worlds are addressed by ``world_id`` so one backend (or one HTTP server) can host many concurrent episodes. Over
HTTP the env pushes a fresh world with :meth:`Backend.put_world` and pulls it back with :meth:`Backend.fetch_world`.

No backend method raises for a transport or server failure: ``invoke`` returns a typed :class:`RawOutcome`, and so
do ``put_world``, ``set_faults`` and ``fetch_world`` (``get_world`` returns None when the world cannot be had).

Fault injection (:class:`FaultConfig`) lives in the backend, where faults happen in reality: transient failures,
timeouts, garbled payloads (a valid JSON shell with garbled content) and latency. ``set_faults(cfg, world_id)``
sets them for one world (one episode), ``set_faults(cfg)`` for the whole backend; over HTTP they are pushed to
the server (``PUT /worlds/{id}/faults``), which injects them for real. In-process, latency is *simulated* by
default (added to the reported latency, not slept), so that training is not slowed by sleeping; set
``realtime=True`` to sleep for real.
"""

from __future__ import annotations

import importlib
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, ConfigDict, Field

from agentic_ray.skills.contracts import SkillContract


class ToolError(Exception):
    """Raised by a handler to return a typed error code instead of a payload."""

    def __init__(self, code: str, message: str = "", retryable: bool | None = None) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.retryable = retryable


class DomainWorld(Protocol):
    """What a domain world must offer to travel over HTTP."""

    def to_dict(self) -> dict[str, Any]: ...


Handler = Callable[[Any, dict[str, Any]], dict[str, Any]]


@dataclass
class RawOutcome:
    """What one attempt returned, before the executor's output checks."""

    ok: bool
    payload: dict[str, Any] = field(default_factory=dict)
    error_code: str | None = None
    message: str = ""
    latency_ms: float = 0.0  # measured wall time plus simulated latency
    retryable: bool | None = None  # a backend's own verdict; None → the contract decides


OK = RawOutcome(True)


class FaultConfig(BaseModel):
    """Fault-injection knobs. Seed 002's logistics API (820 ± 340 ms) is ``latency_ms=820, latency_std_ms=340``."""

    model_config = ConfigDict(extra="forbid")

    failure_rate: float = Field(
        default=0.0, ge=0, le=1, description="Share of calls that fail with `failure_code`."
    )
    failure_code: str = Field(
        default="UPSTREAM_ERROR",
        description="Code of an injected failure: UPSTREAM_ERROR (a transient fault, retried), or CONFLICT (the "
        "call lost a race with another writer: what a generic stale-information caller error injects).",
    )
    timeout_rate: float = Field(
        default=0.0, ge=0, le=1, description="Share of calls that hang past the timeout."
    )
    garbage_rate: float = Field(default=0.0, ge=0, le=1, description="Share of calls with a garbled payload.")
    latency_ms: float = Field(default=0.0, ge=0, description="Mean added latency.")
    latency_std_ms: float = Field(
        default=0.0, ge=0, description="Std of the added latency (normal, clipped at 0)."
    )
    latency_dist: str = Field(
        default="normal", pattern="^(normal|lognormal)$", description="Latency distribution."
    )
    per_skill: dict[str, FaultConfig] = Field(default_factory=dict, description="Overrides by skill name.")
    seed: int | None = Field(default=None, description="Seed of the fault RNG.")

    def for_skill(self, name: str) -> FaultConfig:
        return self.per_skill.get(name, self)

    @property
    def active(self) -> bool:
        return bool(
            self.failure_rate or self.timeout_rate or self.garbage_rate or self.latency_ms or self.per_skill
        )


class FaultInjector:
    """Draws faults for one call. Thread-safe; seeded."""

    def __init__(self, cfg: FaultConfig | None = None) -> None:
        self.cfg = cfg or FaultConfig()
        # Seeded at the first draw that needs it, to the same sequence: the env sets an episode's faults at every
        # reset, mostly none, and seeding a Random (from os.urandom without a seed) was ~1.4% of reset time
        # (py-spy, help-desk).
        self._rng: random.Random | None = None
        self._lock = threading.Lock()

    def draw(self, skill: str) -> tuple[str | None, float]:
        """Returns (fault kind or None, added latency in ms). Kinds: "failure", "timeout", "garbage"."""
        c = self.cfg.for_skill(skill)
        if not c.active:
            return None, 0.0
        with self._lock:
            if self._rng is None:
                self._rng = random.Random(self.cfg.seed)
            u = self._rng.random()
            lat = 0.0
            if c.latency_ms or c.latency_std_ms:
                if c.latency_dist == "lognormal" and c.latency_ms > 0:
                    import math

                    s2 = math.log(1 + (c.latency_std_ms / c.latency_ms) ** 2)
                    lat = self._rng.lognormvariate(math.log(c.latency_ms) - s2 / 2, math.sqrt(s2))
                else:
                    lat = max(0.0, self._rng.gauss(c.latency_ms, c.latency_std_ms))
        if u < c.timeout_rate:
            return "timeout", lat
        if u < c.timeout_rate + c.failure_rate:
            return "failure", lat
        if u < c.timeout_rate + c.failure_rate + c.garbage_rate:
            return "garbage", lat
        return None, lat

    def failure(self, skill: str) -> ToolError:
        """The error an injected failure of ``skill`` raises (UPSTREAM_ERROR is retryable; any other code is
        retried as the contract says)."""
        code = self.cfg.for_skill(skill).failure_code
        if code == "UPSTREAM_ERROR":
            return ToolError(code, "injected transient failure", retryable=True)
        return ToolError(code, "injected failure: the entity changed since it was read")


def garble(payload: dict[str, Any]) -> dict[str, Any]:
    """A valid JSON shell with garbled content: same keys, values of the wrong kind (seed 000's garbled OCR)."""
    return {k: "\ufffd#@!" if not isinstance(v, str) else None for k, v in payload.items()} or {"_": "\ufffd"}


def resolve_handler(path: str) -> Handler:
    """Import ``module:function``."""
    mod, _, fn = path.partition(":")
    if not fn:
        raise ValueError(f"handler must be 'module:function', got {path!r}")
    return getattr(importlib.import_module(mod), fn)


class Backend(Protocol):
    """One way of reaching skills. No method raises for a transport or server failure."""

    kind: str

    def invoke(
        self,
        contract: SkillContract,
        params: dict[str, Any],
        world_id: str,
        timeout_s: float,
        idempotency_key: str | None = None,
        intent_id: str = "",
    ) -> RawOutcome:
        """Run one attempt. Attempts sharing an ``idempotency_key`` run the handler at most once. ``intent_id``
        keys the host's precondition history (a skill server checks business rules too)."""
        ...

    def put_world(self, world_id: str, world: Any) -> RawOutcome: ...

    def fetch_world(self, world_id: str) -> tuple[Any, RawOutcome]:
        """The world (None on failure) and how fetching it went."""
        ...

    def get_world(self, world_id: str) -> Any:
        """The world, or None when it is unknown or cannot be fetched."""
        ...

    def set_faults(self, faults: FaultConfig, world_id: str | None = None) -> RawOutcome:
        """Fault injection for one world, or (``world_id=None``) for every world without its own."""
        ...

    def drop_world(self, world_id: str) -> None: ...

    def close(self) -> None: ...


class IdempotencyCache:
    """Successful payloads by ``(world_id, idempotency_key)``, bounded (LRU).

    The executor sends one key per agent-level call. When a handler succeeded but its reply was lost or garbled,
    the retry gets the remembered payload instead of running the handler again, as a real service with
    idempotency keys does; otherwise a retried refund would be paid twice (or fail with CONFLICT).
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._d: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def run(self, world_id: str, key: str | None, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if key is None:
            return fn()
        k = (world_id, key)
        with self._lock:
            hit = self._d.get(k)
        if hit is not None:
            return dict(hit)
        payload = fn()
        with self._lock:
            self._d[k] = dict(payload) if isinstance(payload, dict) else payload
            if len(self._d) > self.size:
                self._d.popitem(last=False)
        return payload


class PythonBackend:
    """In-process handlers operating on worlds held in a dict.

    Args:
        handlers: skill name → handler. Skills whose contract names a ``handler`` are resolved lazily.
        faults: fault injection.
        realtime: sleep the injected latency for real (default: simulate it).
        measure_wall: add the handler's measured wall time to the reported latency. Simulated envs turn it off:
            microseconds of Python (or a millisecond GC pause) would leak into SLA statistics, hence into
            observations, and break seeded reproducibility.
    """

    kind = "python"

    def __init__(
        self,
        handlers: dict[str, Handler] | None = None,
        faults: FaultConfig | None = None,
        realtime: bool = False,
        measure_wall: bool = True,
    ) -> None:
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self.faults = FaultInjector(faults)
        self.world_faults: dict[str, FaultInjector] = {}
        self.realtime = realtime
        self.measure_wall = measure_wall
        self.worlds: dict[str, Any] = {}
        self.idempotency = IdempotencyCache()

    def set_faults(self, faults: FaultConfig, world_id: str | None = None) -> RawOutcome:
        """Faults of one world; without ``world_id``, of the whole backend (clearing every per-world setting)."""
        if world_id is None:
            self.faults = FaultInjector(faults)
            self.world_faults.clear()
        else:
            self.world_faults[world_id] = FaultInjector(faults)
        return OK

    def _handler(self, contract: SkillContract) -> Handler:
        h = self.handlers.get(contract.name)
        if h is None:
            if contract.handler is None:
                raise ToolError("DEPENDENCY_MISSING", f"no handler for {contract.name}")
            h = self.handlers[contract.name] = resolve_handler(contract.handler)
        return h

    def invoke(
        self,
        contract: SkillContract,
        params: dict[str, Any],
        world_id: str,
        timeout_s: float,
        idempotency_key: str | None = None,
        intent_id: str = "",
    ) -> RawOutcome:
        t0 = time.perf_counter()
        injector = self.world_faults.get(world_id, self.faults)
        fault, extra_ms = injector.draw(contract.name)

        def latency() -> float:
            wall = _ms_since(t0) if self.measure_wall else 0.0
            return wall + (0.0 if self.realtime else extra_ms)

        try:
            if fault == "timeout":
                extra_ms = max(extra_ms, timeout_s * 1000.0 * 1.5)
                if self.realtime:
                    time.sleep(timeout_s)
                return RawOutcome(
                    False, error_code="TOOL_TIMEOUT", message="injected timeout", latency_ms=latency()
                )
            if self.realtime and extra_ms:
                time.sleep(extra_ms / 1000.0)
            if fault == "failure":
                raise injector.failure(contract.name)
            handler = self._handler(contract)
            world = self.worlds.get(world_id)
            payload = self.idempotency.run(world_id, idempotency_key, lambda: handler(world, params))
            if fault == "garbage":
                payload = garble(payload)
            return RawOutcome(True, payload=payload, latency_ms=latency())
        except ToolError as e:
            return RawOutcome(
                False, error_code=e.code, message=e.message, retryable=e.retryable, latency_ms=latency()
            )
        except Exception as e:  # a handler bug must not escape the gateway
            return RawOutcome(
                False,
                error_code="UPSTREAM_ERROR",
                message=f"{type(e).__name__}: {e}",
                retryable=False,
                latency_ms=latency(),
            )

    def put_world(self, world_id: str, world: Any) -> RawOutcome:
        self.worlds[world_id] = world
        return OK

    def fetch_world(self, world_id: str) -> tuple[Any, RawOutcome]:
        if world_id not in self.worlds:
            return None, RawOutcome(False, error_code="NOT_FOUND", message=f"no world {world_id}")
        return self.worlds[world_id], OK

    def get_world(self, world_id: str) -> Any:
        return self.worlds.get(world_id)

    def drop_world(self, world_id: str) -> None:
        self.worlds.pop(world_id, None)
        self.world_faults.pop(world_id, None)

    def close(self) -> None:
        self.worlds.clear()
        self.world_faults.clear()


class HttpBackend:
    """Skills hosted by ``agentic-ray skills serve`` (or any service speaking the same routes).

    Routes: ``POST /skills/{name}`` with ``{"world_id", "intent_id", "params", "idempotency_key"}`` → ``{"ok",
    "payload", "error_code", "message", "retryable"}``; ``PUT/GET/DELETE /worlds/{world_id}``;
    ``PUT /worlds/{world_id}/faults`` and ``PUT /faults``.

    Every failure (connection refused, timeout, a 5xx page, a non-JSON body, a rejected world) comes back as a
    typed :class:`RawOutcome`: ``TOOL_TIMEOUT``, ``UPSTREAM_ERROR`` (retryable), ``INVALID_INPUT`` for a 4xx the
    server explains, ``NOT_FOUND`` for a 404.

    Args:
        base_url: e.g. ``http://127.0.0.1:8321``.
        world_from_dict: rebuilds a world object from the JSON that ``GET /worlds`` returns.
        timeout_s: timeout of the world and fault requests (skill calls use the contract's timeout).
    """

    kind = "http"

    def __init__(
        self,
        base_url: str,
        world_from_dict: Callable[[dict[str, Any]], Any] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.world_from_dict = world_from_dict
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def _request(
        self, method: str, path: str, body: Any = None, timeout_s: float | None = None
    ) -> tuple[Any, RawOutcome]:
        """One request → (parsed JSON body or None, typed outcome). Never raises."""
        t0 = time.perf_counter()
        kw: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        try:
            r = self._client.request(method, path, json=body, **kw)
        except httpx.TimeoutException:
            return None, RawOutcome(
                False,
                error_code="TOOL_TIMEOUT",
                message=f"{method} {path}: http timeout",
                latency_ms=_ms_since(t0),
            )
        except Exception as e:  # connection refused, reset, a closed client, a bad URL ...
            return None, RawOutcome(
                False,
                error_code="UPSTREAM_ERROR",
                message=f"{method} {path}: {type(e).__name__}: {e}",
                retryable=True,
                latency_ms=_ms_since(t0),
            )
        lat = _ms_since(t0)
        try:
            data = r.json()
        except ValueError:
            data = None
        if r.status_code < 400:
            if data is None:
                return None, RawOutcome(
                    False,
                    error_code="INVALID_OUTPUT",
                    message=f"{method} {path}: non-JSON body",
                    latency_ms=lat,
                )
            return data, RawOutcome(True, latency_ms=lat)
        detail = data.get("detail", data.get("message")) if isinstance(data, dict) else r.text[:200]
        msg = f"{method} {path}: HTTP {r.status_code}: {detail}"
        if r.status_code >= 500:
            return data, RawOutcome(
                False, error_code="UPSTREAM_ERROR", message=msg, retryable=True, latency_ms=lat
            )
        code = "NOT_FOUND" if r.status_code == 404 else "INVALID_INPUT"
        return data, RawOutcome(False, error_code=code, message=msg, retryable=False, latency_ms=lat)

    def invoke(
        self,
        contract: SkillContract,
        params: dict[str, Any],
        world_id: str,
        timeout_s: float,
        idempotency_key: str | None = None,
        intent_id: str = "",
    ) -> RawOutcome:
        request = {
            "world_id": world_id,
            "intent_id": intent_id,
            "params": params,
            "idempotency_key": idempotency_key,
        }
        body, out = self._request("POST", f"/skills/{contract.name}", request, timeout_s)
        if isinstance(body, dict) and "ok" in body:  # the skill protocol, whatever the status code
            return RawOutcome(
                bool(body["ok"]),
                payload=body.get("payload") or {},
                error_code=body.get("error_code"),
                message=body.get("message", ""),
                retryable=body.get("retryable"),
                latency_ms=out.latency_ms,
            )
        if out.ok:
            return RawOutcome(
                False, error_code="INVALID_OUTPUT", message="unexpected body", latency_ms=out.latency_ms
            )
        return out

    def put_world(self, world_id: str, world: Any) -> RawOutcome:
        data = world.to_dict() if hasattr(world, "to_dict") else world
        return self._request("PUT", f"/worlds/{world_id}", data)[1]

    def fetch_world(self, world_id: str) -> tuple[Any, RawOutcome]:
        data, out = self._request("GET", f"/worlds/{world_id}")
        if not out.ok:
            return None, out
        if self.world_from_dict is None:
            return data, out
        try:
            return self.world_from_dict(data), out
        except Exception as e:
            msg = f"GET /worlds/{world_id}: cannot rebuild the world: {type(e).__name__}: {e}"
            return None, RawOutcome(
                False, error_code="INVALID_OUTPUT", message=msg, latency_ms=out.latency_ms
            )

    def get_world(self, world_id: str) -> Any:
        return self.fetch_world(world_id)[0]

    def set_faults(self, faults: FaultConfig, world_id: str | None = None) -> RawOutcome:
        path = "/faults" if world_id is None else f"/worlds/{world_id}/faults"
        return self._request("PUT", path, faults.model_dump())[1]

    def drop_world(self, world_id: str) -> None:
        self._request("DELETE", f"/worlds/{world_id}")

    def close(self) -> None:
        self._client.close()


def _ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0
