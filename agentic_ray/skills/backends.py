"""Skill backends: an in-process Python callable or a real HTTP service, behind one interface.

A domain's tools are plain functions ``handler(world, params) -> payload`` that mutate a domain *world* (a
simulated shop, a factory line). They signal failure by raising :class:`ToolError`. The same handler runs
in-process (:class:`PythonBackend`) or behind ``agentic-ray skills serve`` (:class:`HttpBackend`), with no code
change: the executor only sees :class:`RawOutcome`.

Worlds are addressed by ``world_id`` so one backend (or one HTTP server) can host many concurrent episodes. Over
HTTP the env pushes a fresh world with :meth:`Backend.put_world` and pulls it back with :meth:`Backend.get_world`.

Fault injection (:class:`FaultConfig`) lives in the backend, where faults happen in reality: transient failures,
timeouts, garbled payloads (a valid JSON shell with garbled content) and latency. In-process, latency is
*simulated* by default (added to the reported latency, not slept), so that training is not slowed by sleeping;
set ``realtime=True`` to sleep for real.
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


class FaultConfig(BaseModel):
    """Fault-injection knobs. Seed 002's logistics API (820 ± 340 ms) is ``latency_ms=820, latency_std_ms=340``."""

    model_config = ConfigDict(extra="forbid")

    failure_rate: float = Field(
        default=0.0, ge=0, le=1, description="Share of calls that fail with UPSTREAM_ERROR."
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
        self._rng = random.Random(self.cfg.seed)
        self._lock = threading.Lock()

    def draw(self, skill: str) -> tuple[str | None, float]:
        """Returns (fault kind or None, added latency in ms). Kinds: "failure", "timeout", "garbage"."""
        c = self.cfg.for_skill(skill)
        if not c.active:
            return None, 0.0
        with self._lock:
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
    """One way of reaching skills."""

    kind: str

    def invoke(
        self,
        contract: SkillContract,
        params: dict[str, Any],
        world_id: str,
        timeout_s: float,
        idempotency_key: str | None = None,
    ) -> RawOutcome:
        """Run one attempt. Never raises. Attempts sharing an ``idempotency_key`` run the handler at most once."""
        ...

    def put_world(self, world_id: str, world: Any) -> None: ...

    def get_world(self, world_id: str) -> Any: ...

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
        self.realtime = realtime
        self.measure_wall = measure_wall
        self.worlds: dict[str, Any] = {}
        self.idempotency = IdempotencyCache()

    def set_faults(self, faults: FaultConfig) -> None:
        self.faults = FaultInjector(faults)

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
    ) -> RawOutcome:
        t0 = time.perf_counter()
        fault, extra_ms = self.faults.draw(contract.name)

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
                raise ToolError("UPSTREAM_ERROR", "injected transient failure", retryable=True)
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

    def put_world(self, world_id: str, world: Any) -> None:
        self.worlds[world_id] = world

    def get_world(self, world_id: str) -> Any:
        return self.worlds.get(world_id)

    def drop_world(self, world_id: str) -> None:
        self.worlds.pop(world_id, None)

    def close(self) -> None:
        self.worlds.clear()


class HttpBackend:
    """Skills hosted by ``agentic-ray skills serve`` (or any service speaking the same routes).

    Routes: ``POST /skills/{name}`` with ``{"world_id", "params", "idempotency_key"}`` → ``{"ok", "payload",
    "error_code", "message", "retryable"}``; ``PUT/GET/DELETE /worlds/{world_id}``.

    Args:
        base_url: e.g. ``http://127.0.0.1:8321``.
        world_from_dict: rebuilds a world object from the JSON that ``GET /worlds`` returns.
    """

    kind = "http"

    def __init__(self, base_url: str, world_from_dict: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.world_from_dict = world_from_dict
        self._client = httpx.Client(base_url=self.base_url, timeout=10.0)

    def invoke(
        self,
        contract: SkillContract,
        params: dict[str, Any],
        world_id: str,
        timeout_s: float,
        idempotency_key: str | None = None,
    ) -> RawOutcome:
        t0 = time.perf_counter()
        request = {"world_id": world_id, "params": params, "idempotency_key": idempotency_key}
        try:
            r = self._client.post(f"/skills/{contract.name}", json=request, timeout=timeout_s)
        except httpx.TimeoutException:
            return RawOutcome(
                False, error_code="TOOL_TIMEOUT", message="http timeout", latency_ms=_ms_since(t0)
            )
        except httpx.HTTPError as e:
            return RawOutcome(
                False, error_code="UPSTREAM_ERROR", message=str(e), retryable=True, latency_ms=_ms_since(t0)
            )
        lat = _ms_since(t0)
        try:
            body = r.json()
        except ValueError:
            return RawOutcome(False, error_code="INVALID_OUTPUT", message="non-JSON body", latency_ms=lat)
        if r.status_code >= 500 and not isinstance(body, dict):
            return RawOutcome(
                False,
                error_code="UPSTREAM_ERROR",
                message=f"HTTP {r.status_code}",
                retryable=True,
                latency_ms=lat,
            )
        if not isinstance(body, dict) or "ok" not in body:
            return RawOutcome(False, error_code="INVALID_OUTPUT", message="unexpected body", latency_ms=lat)
        return RawOutcome(
            bool(body["ok"]),
            payload=body.get("payload") or {},
            error_code=body.get("error_code"),
            message=body.get("message", ""),
            retryable=body.get("retryable"),
            latency_ms=lat,
        )

    def put_world(self, world_id: str, world: Any) -> None:
        data = world.to_dict() if hasattr(world, "to_dict") else world
        self._client.put(f"/worlds/{world_id}", json=data).raise_for_status()

    def get_world(self, world_id: str) -> Any:
        r = self._client.get(f"/worlds/{world_id}")
        r.raise_for_status()
        data = r.json()
        return self.world_from_dict(data) if self.world_from_dict else data

    def drop_world(self, world_id: str) -> None:
        self._client.delete(f"/worlds/{world_id}")

    def close(self) -> None:
        self._client.close()


def _ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0
