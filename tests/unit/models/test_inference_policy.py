"""The inference path (InferencePolicy) computes what the training path computes: the same packed logits, state and
critic values within 1e-5, on every registered domain and the plug-in test domain (whose ordered lists are sequence
slots, one paired with another), in every action mode, for each reflection source and ablation; and, where a model
has sequence slots, the same greedy and seeded sampled sequences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_ray.domains import available_domains
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.graph_spec import random_observation
from agentic_ray.models import AAACModel, stack_observations
from agentic_ray.models.inference_policy import InferencePolicy
from agentic_ray.models.sequence_functional import sequence_mode, sequence_sample
from agentic_ray.models.skill_argument_functional import _sequences
from tests.helpers.plugin_domain import NAME as PLUGIN
from tests.helpers.plugin_domain import register
from tests.unit.models.helpers import TINY, toy_batch

ATOL = 1e-5

VARIANTS: dict[str, dict[str, object]] = {
    "oracle": {"reflection_source": "oracle_env"},
    "separate_critics": {"separate_critic_encoders": True, "critics_share_encoder": False, "ffn_mult": 0},
    "state_scorer": {"action_scorer": "state", "evidence_to_policy": False, "reflection_fix_prior": False},
}


def _observations(env: AgentTaskEnv, seed: int = 0) -> dict[str, torch.Tensor]:
    """Reset observations of real tasks, a few steps into them, and random ones with failure evidence (so the
    diagnosis and the fix prior are non-zero), one with every mask open (padded pointer slots are scored too)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(3):
        obs, _ = env.reset(seed=seed + s)
        rows.append(obs)
        for _ in range(2):
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            rows.append(obs)
            if terminated or truncated:
                break
    for i in range(4):
        o = random_observation(env.graph_spec, env.layout, rng)
        o["reflection"] = rng.random(o["reflection"].shape, dtype=np.float32)
        o["failure_evidence"] = (rng.random(o["failure_evidence"].shape) < 0.5).astype(np.float32)
        if i == 0:
            for key in ("skill_mask", "pointer_mask", "list_mask", "source_mask", "proto_mask"):
                if key in o:
                    o[key] = np.ones_like(o[key])
        rows.append(o)
    return stack_observations(rows)


def _check(model: AAACModel, obs: dict[str, torch.Tensor], ctx: str) -> None:
    """Packed logits and state under each ablation, the critics' values, and a batch of one."""
    fast = InferencePolicy.for_model(model)
    with torch.inference_mode():
        for reflection, evidence in [(True, True), (False, True), (False, False)]:
            enc = model.encode(obs, reflection_enabled=reflection, evidence_enabled=evidence)
            want = model.policy_logits(obs, enc)["packed"]
            got = fast(obs, reflection=reflection, evidence=evidence)
            msg = f"{ctx} reflection={reflection} evidence={evidence}"
            torch.testing.assert_close(got.packed, want, atol=ATOL, rtol=0, msg=msg)
            torch.testing.assert_close(got.state, enc.state, atol=ATOL, rtol=0, msg=msg)
        enc = model.encode(obs)
        for w, g in zip(model.critic_values(obs, enc), fast.values(obs, fast(obs).state), strict=True):
            torch.testing.assert_close(g, w, atol=ATOL, rtol=0, msg=f"{ctx} values")
        one = {k: v[:1] for k, v in obs.items()}  # batch 1, the serving case (other row tables)
        want = model.policy_logits(one, model.encode(one))["packed"]
        torch.testing.assert_close(fast(one).packed, want, atol=ATOL, rtol=0, msg=f"{ctx} batch 1")
        if model.policy_heads.packed.sequences:
            _check_sequence_decisions(model, model.policy_logits(obs, enc)["packed"], fast(obs).packed, ctx)


def _check_sequence_decisions(model: AAACModel, want: torch.Tensor, got: torch.Tensor, ctx: str) -> None:
    """Every sequence slot's greedy sequence, and its sequence sampled under one seed, are the same from both
    paths' logits (for every row, whichever skill the row would choose; followers from their leader's)."""
    layout = model.policy_heads.packed
    want_parts, got_parts = layout.split(want), layout.split(got)
    decoded = []
    for decode in (sequence_mode, sequence_sample):
        runs = []
        for parts in (want_parts, got_parts):
            torch.manual_seed(1)
            runs.append(_sequences(parts, layout, decode))
        for i, (w, g) in enumerate(zip(*runs, strict=True)):
            assert w is not None and g is not None
            assert torch.equal(g, w), f"{ctx}: {decode.__name__} of sequence slot {i}"
            decoded.append(w)
    # not vacuous: every slot chooses members in some row, greedy or sampled (the end marker is the width)
    n = len(layout.sequences)
    for i, q in enumerate(layout.sequences):
        assert bool((decoded[i] < q.width).any() | (decoded[n + i] < q.width).any()), f"{ctx}: slot {i} empty"


def _model(env: AgentTaskEnv, prototype: bool = False, **update: object) -> AAACModel:
    torch.manual_seed(0)
    return AAACModel(
        env.graph_spec, env.layout, TINY.model_copy(update=update), prototype_mode=prototype
    ).eval()


@pytest.mark.parametrize("mode", ["structured", "prototype"])
@pytest.mark.parametrize("domain", sorted({*available_domains(), PLUGIN}))
def test_inference_path_equals_training_path(domain: str, mode: str) -> None:
    register()
    env = AgentTaskEnv({"domain": domain, "action_mode": mode})
    env.action_space.seed(0)
    model = _model(env, prototype=mode == "prototype")
    assert InferencePolicy.supports(model)
    obs = _observations(env)
    _check(model, obs, f"{domain}/{mode}")
    if env.graph_spec.modalities:
        # A schema with image or text blocks: the gated multimodal input projections (above, the default) and
        # seed 000's flat concatenation of the same features.
        assert model.encoder.multimodal
        flat = _model(env, prototype=mode == "prototype", modality_fusion="flat")
        assert InferencePolicy.supports(flat) and not flat.encoder.multimodal
        _check(flat, obs, f"{domain}/{mode}/flat")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_inference_path_equals_training_path_for_model_variants(variant: str) -> None:
    env = AgentTaskEnv({"domain": "ecommerce"})
    env.action_space.seed(0)
    model = _model(env, **VARIANTS[variant])
    assert InferencePolicy.supports(model)
    _check(model, _observations(env), variant)


def test_rebuilt_when_the_weights_change() -> None:
    env = AgentTaskEnv({"domain": "inspection"})
    obs = _observations(env)
    torch.manual_seed(0)
    model = AAACModel(env.graph_spec, env.layout, TINY.model_copy(update={"modality_fusion": "flat"})).eval()
    with torch.inference_mode():
        before = InferencePolicy.for_model(model)(obs).packed
    with torch.no_grad():
        model.policy_heads.argument_context[0].weight.mul_(2.0)  # an optimizer step changes weights in place
        model.encoder.layers[0].attention.add_(0.5)
    with torch.inference_mode():
        after = InferencePolicy.for_model(model)(obs).packed
        want = model.policy_logits(obs, model.encode(obs))["packed"]
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, want, atol=ATOL, rtol=0)


def test_inference_path_equals_training_path_on_the_toy_spec() -> None:
    """The toy spec's sequence slots: a unique leader, a slot with repeats that may be empty (lo 0), and a
    follower over another node type than its leader's."""
    spec, layout, obs = toy_batch(6)
    torch.manual_seed(0)
    model = AAACModel(spec, layout, TINY).eval()
    kinds = {(q.unique, q.lo == 0, q.leader >= 0) for q in model.policy_heads.packed.sequences}
    assert kinds == {(True, False, False), (False, True, False), (False, False, True)}
    assert InferencePolicy.supports(model)
    _check(model, obs, "toy")


def test_models_it_does_not_cover_fall_back_to_the_training_path() -> None:
    from ray.rllib.core.columns import Columns

    from agentic_ray.models.aaac_rl_module import AAACRLModule

    spec, layout, obs = toy_batch(4)
    torch.manual_seed(0)
    module = AAACRLModule(
        observation_space=None,
        action_space=layout.action_space(),
        model_config={"graph_spec": spec, "action_layout": layout, **TINY.model_dump(), "encoder": "flat"},
    ).eval()
    assert InferencePolicy.unsupported(module.model) == "encoder 'flat'"
    with torch.no_grad():
        want = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
        got = module.forward_inference_fast({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_a_model_that_acted_through_the_inference_path_still_copies_and_pickles() -> None:
    """The cached inference path (per-thread work tables) is left out of copies and pickles: AAAC's anchor snapshot
    deep-copies the learner's module, which the pipeline's greedy evaluations act with (measured: ``cannot pickle
    '_thread._local' object`` at the RL stage's start after an evaluation without traces). The copy acts like the
    original and builds its own path."""
    import copy
    import pickle

    env = AgentTaskEnv({"domain": "ecommerce"})
    env.action_space.seed(0)
    model = _model(env)
    obs = _observations(env)
    with torch.inference_mode():
        want = InferencePolicy.for_model(model)(obs).packed.clone()
    for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert getattr(twin, "_inference_policy", None) is None
        with torch.inference_mode():
            got = InferencePolicy.for_model(twin)(obs).packed
        torch.testing.assert_close(got, want, atol=0, rtol=0)
        assert twin._inference_policy[2] is not model._inference_policy[2]


def test_work_tables_are_per_thread_and_results_outlive_them() -> None:
    """The encoder's work tables are kept per thread and batch size (Serve runs forwards in a thread pool): forwards
    in three threads at once give what one thread gives; a returned result is not overwritten by later forwards; a
    batch past the kept sizes (fresh tables) still equals the training path."""
    import threading

    env = AgentTaskEnv({"domain": "ecommerce"})
    env.action_space.seed(0)
    model = _model(env)
    obs = _observations(env)
    one = {k: v[1:2] for k, v in obs.items()}
    fast = InferencePolicy.for_model(model)
    with torch.inference_mode():
        want_batch, want_one = fast(obs).packed.clone(), fast(one).packed.clone()
        kept = fast(obs)
        fast(one)
        torch.testing.assert_close(kept.packed, want_batch, atol=0, rtol=0)
        big = {
            k: v.repeat(5, *[1] * (v.dim() - 1)) for k, v in obs.items()
        }  # 5 x 13 rows: past the kept sizes
        assert big["skill_mask"].shape[0] > 64
        torch.testing.assert_close(
            fast(big).packed, model.policy_logits(big, model.encode(big))["packed"], atol=ATOL, rtol=0
        )
    errors: list[str] = []

    def run(worker: int) -> None:
        with torch.inference_mode():
            for i in range(8):
                batch, want = (obs, want_batch) if (i + worker) % 2 else (one, want_one)
                if not torch.equal(fast(batch).packed, want):
                    errors.append(f"thread {worker}, forward {i}")

    threads = [threading.Thread(target=run, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


@pytest.mark.parametrize("mode", ["structured", "prototype"])
@pytest.mark.parametrize("fusion", ["gated", "flat"])
def test_inference_path_equals_training_path_with_the_task_context(fusion: str, mode: str) -> None:
    """Argument heads that read the request's task text (``argument_task_context``, what configs/inspection.yaml
    sets), with the gated multimodal projection and with seed 000's flat one (the task text then has an encoder
    of its own)."""
    env = AgentTaskEnv({"domain": "inspection", "action_mode": mode})
    env.action_space.seed(0)
    model = _model(env, prototype=mode == "prototype", argument_task_context=True, modality_fusion=fusion)
    assert InferencePolicy.supports(model)
    _check(model, _observations(env), f"task context/{fusion}/{mode}")


def test_callable_with_grad_enabled_on_a_multimodal_model() -> None:
    """Outside inference mode, with grad on (a caller's own loop), the multimodal input rows are still written into
    the work tables: the training path's modules run without a graph there."""
    env = AgentTaskEnv({"domain": "inspection"})
    env.action_space.seed(0)
    model = _model(env)
    assert model.encoder.multimodal
    obs = _observations(env)
    want = model.policy_logits(obs, model.encode(obs))["packed"].detach()
    torch.testing.assert_close(InferencePolicy.for_model(model)(obs).packed, want, atol=ATOL, rtol=0)
