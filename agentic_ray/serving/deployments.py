"""The Ray Serve deployments of a trained policy and the application builder (``serve_apps/policy.yaml`` and
``agentic-ray serve`` both build the application with :func:`build_app`).

Deployments (thin wrappers; the logic is in :mod:`agentic_ray.serving`):

* ``stable`` and, during a canary, ``candidate``: :class:`PolicyDeployment`, one per policy version, each a
  batched model server (:class:`~agentic_ray.serving.batching.Batcher`, observations in, actions out). Scale them with ``num_replicas``.
  An arm with ``in_gateway: true`` has no deployment: the gateway replica holds its :class:`BatchedPolicy`
  (one Serve hop less per decision; its batch settings travel in the gateway's ``user_config``).
* ``Gateway``: the FastAPI ingress (auth, limits, schemas, trace ids), the canary router, agent-mode sessions
  and the decision/feedback store. It keeps sessions and the canary state in memory, so it runs as one replica.

Runtime switches are Serve ``user_config`` (applied by ``reconfigure``, no restart): ``strategy_mode`` on the
Gateway, ``max_batch_size`` / ``batch_wait_timeout_s`` on each policy deployment (on the gateway for the
in-gateway arms). ``strategy_mode`` can also be set at once with ``PUT /v1/strategy`` (the gateway is one
replica, so that reaches every request): a redeploy reaches the replica only after the controller has rebuilt
the application to diff it (352-600 ms measured), the endpoint within one request.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle

from agentic_ray.serving.batching import Batcher
from agentic_ray.serving.http_app import create_app
from agentic_ray.serving.live_metrics import RayMetricsSink
from agentic_ray.serving.policy_runner import PolicyRunner
from agentic_ray.serving.schemas import ActRequest
from agentic_ray.serving.service import PolicyService
from agentic_ray.serving.settings import (
    ArmName,
    ArmSettings,
    GatewayUserConfig,
    PolicyUserConfig,
    ServeSettings,
)


class _Replica:
    """The gateway replica of this process. A class attribute, not a module global: Serve pickles the ingress
    class and its FastAPI app by value, which copies the module globals they use, while a class importable by
    name is pickled by reference, so the replica's constructor and the app's routes see the same one."""

    service: PolicyService | None = None
    gateway: Gateway | None = None

    @staticmethod
    def get_service() -> PolicyService:
        if _Replica.service is None:
            raise RuntimeError("the gateway replica has not started")
        return _Replica.service

    @staticmethod
    def get_gateway() -> Gateway:
        if _Replica.gateway is None:
            raise RuntimeError("the gateway replica has not started")
        return _Replica.gateway


def _check_batch_fits(max_batch_size: int) -> None:
    """Refuse a batch size the replica's ``max_ongoing_requests`` can never fill (the measured collapse:
    ``@serve.batch(32)`` with the default 5 gave 13-17 req/s and a p99 of 4 s). Serve's own batching warning reads
    the same (developer) field."""
    ongoing = serve.get_replica_context()._deployment_config.max_ongoing_requests
    if ongoing < max_batch_size:
        raise ValueError(
            f"max_ongoing_requests ({ongoing}) < max_batch_size ({max_batch_size}): raise max_ongoing_requests"
        )


class BatchedPolicy:
    """One policy version: batched observations -> actions and skill probabilities. Its own deployment
    (:data:`PolicyDeployment`) or, for an arm with ``in_gateway``, an object inside the gateway replica
    (``off_loop``: its forwards run in a worker thread, so the gateway's event loop keeps serving meanwhile and
    the policy timeout applies to them). Single calls of :meth:`act` are batched by a
    :class:`~agentic_ray.serving.batching.Batcher`."""

    def __init__(self, arm: dict[str, Any], off_loop: bool = False) -> None:
        s = ArmSettings.model_validate(arm)
        self.off_loop = off_loop
        self.version = s.resolved_version()
        self.runner = PolicyRunner(s.checkpoint, sample=s.sample, torch_threads=s.torch_threads)
        self.batching = s.batching
        self.batcher: Batcher[dict[str, Any], dict[str, Any]] = Batcher(self._forward)
        self.reconfigure(s.batching.model_dump())

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        cfg = PolicyUserConfig.model_validate(user_config)
        _check_batch_fits(cfg.max_batch_size)
        self.batcher.configure(cfg.max_batch_size, cfg.batch_wait_timeout_s)
        self.batching = cfg

    async def act(self, obs: dict[str, Any]) -> dict[str, Any]:
        """One observation's ``{"action", "skill_probs"}``, from a batched forward."""
        return await self.batcher(obs)

    async def _forward(self, obs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.batching.fault_delay_ms:  # chaos testing: a slow policy (PolicyUserConfig.fault_delay_ms)
            await asyncio.sleep(self.batching.fault_delay_ms / 1e3)
        return await self.runner.act_off_loop(obs) if self.off_loop else self.runner.act(obs)

    def info(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "observation_space": self.runner.observation_space,
            "batching": self.batching.model_dump(),
            "stats": self.runner.stats.summary(),
        }


READY_TIMEOUT_S = 2.0
"""How long ``/readyz`` waits for each policy's ``info``."""

PolicyDeployment = serve.deployment(BatchedPolicy)
"""A policy version as its own deployment (``stable``, ``candidate``): scale it with ``num_replicas``."""


http_app = create_app(
    _Replica.get_service,
    ready=lambda: _Replica.get_gateway().ready(),
    extra_metrics=lambda: _Replica.get_gateway().policy_stats(),
)


@serve.deployment
@serve.ingress(http_app)
class Gateway:
    """The HTTP ingress around :class:`~agentic_ray.serving.service.PolicyService`."""

    def __init__(
        self,
        settings: dict[str, Any],
        stable: DeploymentHandle | None = None,
        candidate: DeploymentHandle | None = None,
    ) -> None:
        s = ServeSettings.model_validate(settings)
        arms = s.arms()
        given = {"stable": stable, "candidate": candidate}
        # an in-gateway arm's policy lives here; the others are reached through their deployment's handle
        self.local: dict[ArmName, BatchedPolicy] = {
            k: BatchedPolicy(a.model_dump(mode="json"), off_loop=True)
            for k, a in arms.items()
            if a.in_gateway
        }
        self.handles: dict[str, DeploymentHandle] = {}
        for k, a in arms.items():
            h = given[k]
            if not a.in_gateway:
                if h is None:
                    raise ValueError(
                        f"arm {k} runs as its own deployment but the gateway got no handle to it"
                    )
                self.handles[k] = h
        self.arm_settings = arms
        versions: dict[str, str] = {k: a.resolved_version() for k, a in arms.items()}
        self.service = PolicyService(s, self._call_policy, versions, sink=RayMetricsSink())
        self._ready: tuple[bool, dict[str, Any]] | None = None
        self._ready_at = 0.0
        _Replica.service, _Replica.gateway = self.service, self

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        cfg = GatewayUserConfig.model_validate(user_config)
        self.service.set_strategy(cfg.strategy_mode)
        self.service.set_sla(cfg.sla or self.service.settings.sla)
        for arm, policy in self.local.items():
            policy.reconfigure(cfg.batching.get(arm, self.arm_settings[arm].batching).model_dump())

    async def _call_policy(self, arm: str, obs: dict[str, Any]) -> dict[str, Any]:
        if arm in self.local:
            return await self.local[arm].act(obs)
        return await self.handles[arm].act.remote(obs)

    async def _info(self, arm: str) -> dict[str, Any]:
        if arm in self.local:
            return self.local[arm].info()
        return await self.handles[arm].info.remote()

    async def decide(self, body: dict[str, Any]) -> dict[str, Any]:
        """``/v1/act`` through a deployment handle (no HTTP): what the benchmark's ``handle_p50_ms`` times."""
        from agentic_ray.serving.http_guards import current_trace_id

        return await self.service.act(ActRequest.model_validate(body), current_trace_id())

    async def ready(self) -> tuple[bool, dict[str, Any]]:
        """Every policy answers within :data:`READY_TIMEOUT_S`, with the observation space of the served env.
        Checked again at most once a second (a probe every few seconds costs one ``info`` call per arm). An arm
        that does not answer is reported ``restarting`` while Serve replaces its replica."""
        now = time.monotonic()
        if self._ready is not None and now - self._ready_at < 1.0:
            return self._ready
        want = self.service.pool.template.observation_space
        detail: dict[str, Any] = {"strategy_mode": self.service.strategy_mode, "policies": {}}
        ok = True
        for arm in self.arm_settings:
            try:
                info = await asyncio.wait_for(self._info(arm), READY_TIMEOUT_S)
            except Exception as e:
                ok = False
                detail["policies"][arm] = await self._not_answering(arm, e)
                continue
            match = info["observation_space"] == want
            ok &= match
            detail["policies"][arm] = (
                info["version"] if match else "observation space differs from the served env's"
            )
        self._ready, self._ready_at = (ok, detail), time.monotonic()
        return self._ready

    async def _not_answering(self, arm: str, error: Exception) -> str:
        """Why an arm's deployment does not answer, from Serve's own status of its replicas."""
        why = (
            "no answer within the readiness timeout" if isinstance(error, TimeoutError) else repr(error)[:200]
        )
        try:
            app = serve.get_replica_context().app_name
            status = await asyncio.to_thread(serve.status)
            d = status.applications[app].deployments[arm]
            replicas = {str(k): v for k, v in d.replica_states.items()}
        except Exception as e:
            return f"unreachable: {why} (Serve status unavailable: {e!r})"[:300]
        if replicas.get("RUNNING", 0) and not set(replicas) - {"RUNNING"}:
            # Serve has not noticed a dead replica yet (it health-checks them periodically), or it is overloaded
            return f"not answering: {why}; Serve counts {replicas['RUNNING']} running replica(s)"[:300]
        return f"restarting: Serve is replacing its replica (replicas: {replicas}, deployment {d.status})"[
            :300
        ]

    async def policy_stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for arm in self.arm_settings:
            try:
                info = await self._info(arm)
                out[arm] = {"version": info["version"], **info["batching"], **info["stats"]}
            except Exception as e:
                out[arm] = {"error": repr(e)[:300]}
        return {"batching": out}

    def __del__(self) -> None:
        self.service.close()


USER_CODE_THREAD = "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD"
"""Serve's switch (read when a replica starts) between user code on a loop thread of its own (1, the default)
and on the replica's main event loop (0): see ``ServeSettings.gateway_code_thread``."""


def build_app(args: dict[str, Any] | ServeSettings) -> Any:
    """The application from its settings (``args`` of ``serve_apps/policy.yaml``, validated here)."""
    s = (args if isinstance(args, ServeSettings) else ServeSettings.model_validate(args)).absolute_paths()

    logging = {"enable_access_log": s.access_log}

    def policy(name: str, arm: ArmSettings | None) -> Any:
        if arm is None or arm.in_gateway:
            return None
        return PolicyDeployment.options(  # type: ignore[attr-defined]
            name=name,
            num_replicas=arm.num_replicas,
            max_ongoing_requests=arm.max_ongoing_requests,
            ray_actor_options={"num_cpus": arm.num_cpus},
            user_config=arm.batching.model_dump(),
            logging_config=logging,
        ).bind(arm.model_dump(mode="json"))

    gateway_actor: dict[str, Any] = {"num_cpus": s.gateway_num_cpus}
    if not s.gateway_code_thread:
        gateway_actor["runtime_env"] = {"env_vars": {USER_CODE_THREAD: "0"}}
    return Gateway.options(  # type: ignore[attr-defined]
        max_ongoing_requests=s.gateway_max_ongoing_requests,
        ray_actor_options=gateway_actor,
        user_config=s.gateway_user_config(),
        logging_config=logging,
    ).bind(s.model_dump(mode="json"), policy("stable", s.stable), policy("candidate", s.candidate))
