"""Shared helpers of the serving tests: real policy modules on disk, the service token, and the service on
in-process policies (no Ray)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hypothesis import strategies as st

from agentic_ray.algorithms.build import module_spec
from agentic_ray.domains import get_domain
from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.serving.client import act_body, transcript_entry
from agentic_ray.settings import load_settings

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
TOKEN = "test-token-" + "x" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def save_untrained_module(path: Path, seed: int = 0) -> Path:
    """An untrained AAAC module of the tiny config's sizes on the default e-commerce env, saved with the RLModule
    API (what ``RLModule.from_checkpoint`` loads). Its greedy policy is deterministic; sampled, it is a random
    policy."""
    torch.manual_seed(seed)
    module = module_spec(load_settings(TINY)).build()
    module.save_to_path(str(path))
    return path


def env_config() -> dict:
    """The env config those modules were built for (the tiny config's)."""
    return load_settings(TINY).env.model_dump(mode="json")


def validation_env() -> AgentTaskEnvConfig:
    """The env config as serving uses it (validation split, no faults)."""
    from agentic_ray.eval.evaluator import validation_env_config

    return validation_env_config(load_settings(TINY).env, 0.0)


def make_service(
    settings: dict[str, Any],
    fail: Collection[str] = (),
    delay_s: Mapping[str, float] | None = None,
    calls: dict[str, int] | None = None,
) -> tuple[Any, Any]:
    """A :class:`PolicyService` whose arms are real :class:`PolicyRunner` s called in-process (``fail``: arms
    whose calls raise, as a dead replica's do; ``delay_s``: seconds an arm waits before answering, as a slow
    replica does, read at every call so a test may change it; ``calls``: counts the calls each arm receives), and
    a TestClient on its HTTP app that reports a server error as a 500 response."""
    from fastapi.testclient import TestClient

    from agentic_ray.serving.http_app import create_app
    from agentic_ray.serving.policy_runner import PolicyRunner
    from agentic_ray.serving.service import PolicyService
    from agentic_ray.serving.settings import ServeSettings

    s = ServeSettings.model_validate(settings)
    runners = {"stable": PolicyRunner(s.stable.checkpoint)}
    if s.candidate is not None:
        runners["candidate"] = PolicyRunner(s.candidate.checkpoint, sample=s.candidate.sample)
    delays = delay_s if delay_s is not None else {}

    async def call(arm: str, obs: dict) -> dict:
        if calls is not None:
            calls[arm] = calls.get(arm, 0) + 1
        if arm in fail:
            raise RuntimeError(f"{arm} is down")
        if delays.get(arm):
            await asyncio.sleep(delays[arm])
        return runners[arm].act([obs])[0]

    versions = {a: (s.stable if a == "stable" else s.candidate).resolved_version() for a in runners}  # type: ignore[union-attr]
    svc = PolicyService(s, call, versions, pool_size=1)
    return svc, TestClient(create_app(lambda: svc), raise_server_exceptions=False)


LOOP_ANCHOR_KL = 10.0
"""The trust region of the Serve loop's refine (``RefineConfig.anchor_kl_coeff``; its description has the figures)."""

# 8 episodes per step: with the completion check, 4 let a candidate equal to stable be rolled back once (0 of its
# first 4 episodes completed, z > 3.09); at 8 that takes 0 of 8, and a random candidate (completion ~0.02) is
# still rolled back at the first minimum sample.
CANARY = {"min_calls": 30, "min_episodes": 8, "min_step_s": 0.0}
# The canary tests judge TCSR, DVR and completion; a generous policy timeout keeps a loaded CI box's slow answers
# from counting as candidate errors (a candidate slower than its SLA is rolled back: test_resilience.py).
CANARY_SLA = {"policy_timeout_ms": 20_000.0}


@dataclass
class Served:
    """The shared Serve instance: its URL, each application's settings, the stage checkpoint every arm with the
    trained policy serves, and what the loop from main's feedback to good's candidate did (:func:`close_the_loop`)."""

    url: str
    settings: dict[str, Any]
    checkpoint: Path
    loop: dict[str, Any]

    def client(self, prefix: str = "") -> Any:
        import httpx

        return httpx.Client(base_url=self.url + prefix, timeout=120)


def stream_episode(c: Any, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """One agent-mode episode streamed from ``/v1/episodes``: its session id and its steps."""
    r = c.post("/v1/episodes", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    events = [b.split("\n") for b in r.text.strip().split("\n\n")]
    assert events[0][0] == "event: session", r.text[:500]
    return json.loads(events[0][1][6:])["session_id"], [json.loads(e[1][6:]) for e in events[1:]]


LOOP_TASKS = [(f, 20_000 + i) for i, f in enumerate(get_domain("ecommerce").families * 2)]
"""The customer traffic of the loop: two tasks of every family, on seeds no other test uses."""


def close_the_loop(url: str, run: Path, main: Any, good: Any, tmp: Path) -> tuple[Any, dict[str, Any]]:
    """Issue 31's loop up to the candidate: agent-mode episodes streamed from the running ``main`` application
    with feedback posted over HTTP (success when the episode completed, else a failure), then ``refine`` on
    main's store and the pipeline ``run`` with ``good``'s Serve config, where it registers its update as the
    candidate. Returns ``good``'s settings with that candidate and what happened (for the test to check)."""
    import time

    import httpx
    import yaml

    from agentic_ray.refine import RefineConfig, refine
    from agentic_ray.serving.deploy import app_config
    from agentic_ray.serving.settings import ServeSettings

    t0 = time.monotonic()
    sids, outcomes = [], []
    with httpx.Client(base_url=url, timeout=120) as c:
        for family, seed in LOOP_TASKS:
            sid, steps = stream_episode(c, {"domain": "ecommerce", "family": family, "seed": seed})
            ok = bool(steps[-1]["done"] and steps[-1]["completed"])
            fb = {"trace_id": sid, "outcome": "success" if ok else "failure"}
            if not ok:
                fb["reason"] = "not_solved"
            assert c.post("/v1/feedback", json=fb, headers=AUTH).status_code == 200
            sids.append(sid)
            outcomes.append(fb["outcome"])
    t_traffic = time.monotonic() - t0
    serve_yaml = tmp / "good.yaml"
    serve_yaml.write_text(yaml.safe_dump({"applications": [app_config(good, "good")]}))
    # 10 validation tasks per family: on 1 (10 tasks) the gates passed an update that lost 10 of 100 validation
    # tasks and won none (McNemar p = 0.001 on 100, 0.5 on 10), and the canary then rolled it back now and then
    # (refine took 2.3-3.6 s on 10 tasks, 4.4-6.2 s on 100, at load 3-6).
    # The trust region (off by default): without it this fixture's update (9 wrong_entity samples) completes 0.70
    # of the canary's traffic against stable's 0.81 and the gates on 100 tasks reject it; the test is the loop's
    # promotion path, the rollback of a worse candidate is test_canary_rolls_back_a_random_candidate...
    cfg = RefineConfig(
        max_alternatives=2,
        tasks_per_family=10,
        fix_memory=None,
        serve_config=str(serve_yaml),
        anchor_kl_coeff=LOOP_ANCHOR_KL,
    )
    rep = refine(main.feedback_db, run, cfg)
    apps = yaml.safe_load(serve_yaml.read_text())["applications"]
    loop = {
        "sessions": sids,
        "outcomes": outcomes,
        "report": rep.to_dict(),
        "serve_config": apps,
        "traffic_s": round(t_traffic, 1),
        "refine_s": round(time.monotonic() - t0 - t_traffic, 1),
    }
    return ServeSettings.model_validate(apps[0]["args"]), loop


_SHARED: dict[str, Served] = {}


def build_served(tmp: Path) -> Served:
    """Four applications on one Serve instance (the session's private Ray, its own free HTTP port), each a
    gateway plus its policy deployments: ``main`` (a tiny trained run as the stable policy), ``bad`` (the same
    stable policy and a random policy as the canary candidate: an untrained module, sampled), ``good`` (the same
    stable policy and, as its candidate, the update ``refine`` trained from main's feedback:
    :func:`close_the_loop`) and ``local`` (main's stable policy inside its gateway replica, ``in_gateway``: no
    policy deployment). ``good`` is deployed last, once main has served the loop's traffic (the other three start
    meanwhile)."""
    import time

    from agentic_ray.eval.policy_loading import pick_checkpoint
    from agentic_ray.serving.deploy import app_config, deploy, wait_running
    from agentic_ray.serving.settings import ServeSettings
    from agentic_ray.skills.server import free_port
    from agentic_ray.stages.pipeline import run_pipeline

    run = tmp / "run"
    # Imitation from 120 demonstrations x 8 epochs (tiny's 30 x 2 gives a near-flat policy whose greedy choice
    # flips on tiny updates): the stable policy must be good enough that a random candidate is measurably worse
    # (the canary tests) and must make varied decisions (serving must reproduce them). Measured: the greedy
    # policy then uses 10 skills over 3 validation episodes, the same after RL and reflection; the whole
    # three-stage run took ~40 s. The imitation checkpoint is served; with tiny's own IL the reflection stage
    # (1 iteration) collapsed onto one skill for all 30 decisions (CI, stop 19). Only the imitation stage runs:
    # its checkpoint is the one served, and RL and reflection after it cost ~15 s for checkpoints nothing read.
    il = {"stages.il.demos": 120, "stages.il.epochs": 8, "stages.run": ["il"]}
    run_pipeline(load_settings(TINY, {"wandb.mode": "disabled", **il}), run_dir=run, progress=lambda _m: None)
    served_ckpt = pick_checkpoint(run, "il")
    random_policy = save_untrained_module(tmp / "random", seed=1)
    (tmp / "token").write_text(TOKEN)
    common = {"auth": {"token_file": str(tmp / "token")}, "gateway_num_cpus": 0}
    # main, bad and good serve each policy as a deployment of its own (the chaos tests kill those replicas)
    stable = {"checkpoint": str(served_ckpt), "num_cpus": 0, "version": "tiny", "in_gateway": False}
    canary = {"canary": CANARY, "sla": CANARY_SLA}
    settings = {
        "main": ServeSettings.model_validate(
            {**common, "stable": stable, "feedback_db": str(tmp / "main.sqlite")}
        ),
        "bad": ServeSettings.model_validate(
            {
                **common,
                **canary,
                "stable": stable,
                "candidate": {
                    "checkpoint": str(random_policy),
                    "num_cpus": 0,
                    "sample": True,
                    "version": "random",
                    "in_gateway": False,
                },
                "feedback_db": str(tmp / "bad.sqlite"),
                "route_prefix": "/bad",
                "access_log": True,  # the others keep the default (none): test_serve_policy checks both
            }
        ),
        "good": ServeSettings.model_validate(
            {
                **common,
                **canary,
                "stable": stable,
                # the arm refine's candidate fills (its checkpoint and version: close_the_loop)
                "candidate": {**stable, "version": "tiny-again"},
                "feedback_db": str(tmp / "good.sqlite"),
                "route_prefix": "/good",
            }
        ),
        "local": ServeSettings.model_validate(
            {
                **common,
                "stable": {**stable, "in_gateway": True},
                "feedback_db": str(tmp / "local.sqlite"),
                "route_prefix": "/local",
            }
        ),
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = [app_config(s, name) for name, s in settings.items() if name != "good"]
    deploy(first, http_options={"host": "127.0.0.1", "port": port}, wait=False)
    wait_running("main", 900)
    settings["good"], loop = close_the_loop(url, run, settings["main"], settings["good"], tmp)
    t0 = time.monotonic()
    deploy([app_config(settings["good"], "good")], timeout_s=900)
    loop["good_deploy_s"] = round(time.monotonic() - t0, 1)
    for a in first:
        wait_running(a["name"], 900)
    return Served(url, settings, served_ckpt, loop)


def shared_served(request: Any, tmp_path_factory: Any) -> Iterator[Served]:
    """The module fixture of every serving integration module: one Serve instance per test session (deploying
    the four applications costs about a minute on two CPUs), shut down after the last module that uses it.

    A session-scoped fixture imported into two modules would be built once per module (pytest keys fixtures by
    the module that defines them), hence this process-level instance."""
    if "served" not in _SHARED:
        _SHARED["served"] = build_served(tmp_path_factory.mktemp("serve"))
    yield _SHARED["served"]
    items = request.session.items
    mine = [i for i, it in enumerate(items) if it.module is request.module]
    if not any("served" in it.fixturenames for it in items[max(mine, default=-1) + 1 :]):
        from ray import serve

        serve.shutdown()
        _SHARED.clear()


# ---------------------------------------------------------------------------------------------------- hostile input
# What the property tests (tests/unit/serving/test_hostile_input.py) and benchmarks/serve_chaos.py send.
def valid_act() -> dict[str, Any]:
    """A valid /v1/act body of the e-commerce domain, with one transcript call."""
    _w, task = get_domain("ecommerce").make_task("quality_refund", 1)
    d = act_body("ecommerce", task)
    d["transcript"] = [
        transcript_entry(
            "inventory.check", {"sku": "SKU9448"}, payload={"sku": "SKU9448", "in_stock": True, "stock": 4}
        )
    ]
    return d


VALID_BODIES = {
    ("post", "/v1/act"): valid_act(),
    ("post", "/v1/sessions"): {"domain": "ecommerce", "family": "address_error", "seed": 3},
    ("post", "/v1/episodes"): {"domain": "ecommerce", "family": "stock_inquiry", "seed": 1},
    ("post", "/v1/feedback"): {"trace_id": "t" * 32, "outcome": "failure", "reason": "other"},
    ("put", "/v1/strategy"): {"strategy_mode": "learned"},
    ("post", "/v1/sessions/" + "0" * 32 + "/step"): {},
}

# leaves that broke the service or a parser: non-finite numbers (Python's json reads NaN, Infinity and 1e400), lone
# surrogates, huge integers and strings, wrong types
hostile_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 5e-324, 0.0, -0.0]),
    st.text(alphabet=st.characters(codec=None, categories=None), max_size=20),
    st.sampled_from(["\ud800", "\udfff", "a\ud800b", "yes", "1", "true", "", "x" * 5000]),
)
json_value = st.recursive(
    hostile_leaf,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def body_paths(v: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON value, as key paths (the root is ``()``)."""
    out = [prefix]
    if isinstance(v, dict):
        for k, x in v.items():
            out += body_paths(x, (*prefix, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += body_paths(x, (*prefix, i))
    return out


def replace_at(v: Any, path: tuple, new: Any) -> Any:
    """A copy of ``v`` with ``new`` at ``path`` (``new`` itself when the parent is not a container)."""
    if not path:
        return new
    v = json.loads(json.dumps(v))
    cur = v
    if not isinstance(value_at(v, path[:-1]), dict | list):
        return new
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = new
    return v


def nested(depth: int) -> Any:
    """A JSON value ``depth`` containers deep (objects and arrays in turn)."""
    v: Any = 1
    for i in range(depth):
        v = [v] if i % 2 else {"k": v}
    return v


FREE_FORM = [("task", "extra"), ("transcript", 0, "params"), ("transcript", 0, "payload")]
"""The free-form JSON objects of a /v1/act body: a key added there keeps the body valid for the schema, so the
value reaches the service's own code (the observation builder, the rule-based policy, the store)."""


@st.composite
def hostile_value(draw: Any) -> Any:
    """A hostile JSON value, deep nesting or a huge array."""
    how = draw(st.sampled_from(["value", "nest", "huge"]))
    if how == "nest":
        # 33: past the limit; 260 and more broke pydantic's serializer, beyond ~990 the test's own encoder
        return nested(draw(st.sampled_from([20, 33, 100, 300, 600, 900])))
    if how == "huge":
        return [draw(hostile_leaf)] * draw(st.integers(min_value=100, max_value=20_000))
    return draw(json_value)


@st.composite
def mutated(draw: Any, valid: dict[str, Any]) -> Any:
    """A valid body with one place replaced by a hostile value, or a key added next to it."""
    path = draw(st.sampled_from(body_paths(valid)))
    if path and isinstance(value_at(valid, path[:-1]), dict) and draw(st.booleans()):
        path = (*path[:-1], draw(st.text(max_size=6)))
    return replace_at(valid, path, draw(hostile_value()))


def value_at(v: Any, path: tuple) -> Any:
    """The value at ``path``."""
    for k in path:
        v = v[k]
    return v


def bad_inputs() -> list[tuple[str, str, bytes, str]]:
    """Inputs that gave 500s or were wrongly accepted before (the hostile-user probe of issue 29), as
    ``(method, path, raw body, what)``: each must be refused with a 4xx."""

    def act(edit: Any) -> bytes:
        body = valid_act()
        body["transcript"] = []
        edit(body)
        return json.dumps(body, allow_nan=True).encode()

    def amount(v: Any) -> Any:
        return lambda b: b["task"]["goals"][1]["numeric"].__setitem__("amount", v)

    def goal0(k: str, v: Any) -> Any:
        return lambda b: b["task"]["goals"][0].__setitem__(k, v)

    def over_budget(b: dict[str, Any]) -> None:
        b["task"]["budget"] = 8
        b["transcript"] = [
            transcript_entry("inventory.check", {"sku": "SKU9448"}, result_code="NOT_FOUND")
        ] * 20

    def deep(where: str, depth: int) -> Any:
        def edit(b: dict[str, Any]) -> None:
            if where == "extra":
                b["task"]["extra"] = {"deep": nested(depth)}
            else:
                b["transcript"] = [
                    {"skill": "inventory.check", "params": {"sku": nested(depth)}, "result_code": "E"}
                ]

        return edit

    def big_goals(b: dict[str, Any]) -> None:
        b["task"]["goals"] = [{"id": "g", "skill": "inventory.check"}] * 8_000

    def text(v: str) -> Any:
        return lambda b: b["task"]["request"].__setitem__("text", v)

    def stats(v: Any) -> Any:
        return lambda b: b.__setitem__("tool_stats", {"inventory.check": {"p50_ms": v}})

    def payload_nan(b: dict[str, Any]) -> None:
        b["transcript"] = [
            transcript_entry(
                "inventory.check", {"sku": "S"}, payload={"sku": "S", "in_stock": True, "stock": float("nan")}
            )
        ]

    session = '{"domain": "ecommerce", "seed": %s}'
    out: list[tuple[str, str, bytes, str]] = []
    for tok in ("NaN", "Infinity", "-Infinity", "1e400", "false", '"1"', "-1", str(2**31)):
        out.append(("post", "/v1/sessions", (session % tok).encode(), f"seed {tok}"))
        out.append(("post", "/v1/episodes", (session % tok).encode(), f"episode seed {tok}"))
    out += [
        ("post", "/v1/sessions", b'{"domain": "\\ud800"}', "lone surrogate"),
        ("post", "/v1/sessions", b'{"domain": "ecommerce", "family": "\\udfff"}', "lone surrogate"),
        ("post", "/v1/sessions", json.dumps({"domain": nested(300)}).encode(), "300 levels"),
        ("post", "/v1/sessions", b"[" * 5000 + b"]" * 5000, "5,000 levels"),
        ("post", "/v1/sessions", b"\xff\xfe{", "not UTF-8"),
        ("post", "/v1/feedback", b'{"trace_id": "\\ud800", "outcome": "success"}', "lone surrogate"),
        ("post", "/v1/feedback", b'{"trace_id": "t", "outcome": NaN}', "NaN outcome"),
        ("put", "/v1/strategy", b'{"strategy_mode": "random"}', "unknown mode"),
        ("put", "/v1/strategy", b'{"strategy_mode": null}', "null mode"),
        ("post", "/v1/sessions/" + "0" * 32 + "/step", b'{"skill": "refund.trigger"}', "injected call"),
    ]
    for v in (-5, 0, 1e308, float("nan"), float("inf"), float("-inf")):
        out.append(("post", "/v1/act", act(amount(v)), f"refund amount {v}"))
    out += [
        ("post", "/v1/act", act(goal0("safety_check", "yes")), "safety_check 'yes'"),
        ("post", "/v1/act", act(goal0("priority", "1")), "priority '1'"),
        ("post", "/v1/act", act(goal0("priority", True)), "priority true"),
        ("post", "/v1/act", act(over_budget), "20 calls, budget 8"),
        ("post", "/v1/act", act(deep("extra", 300)), "task.extra 300 levels"),
        ("post", "/v1/act", act(deep("extra", 900)), "task.extra 900 levels"),
        ("post", "/v1/act", act(deep("params", 500)), "params 500 levels"),
        ("post", "/v1/act", act(big_goals), "8,000 goals"),
        ("post", "/v1/act", act(text("a\ud800b")), "lone surrogate in the request text"),
        ("post", "/v1/act", act(stats(float("nan"))), "tool_stats NaN"),
        ("post", "/v1/act", act(payload_nan), "payload NaN"),
    ]
    return out
