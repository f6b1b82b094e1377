"""The numeric head copies targets the observation states (``GraphSpec.numeric_targets``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentic_ray.envs.ecommerce import ecommerce_specs
from agentic_ray.envs.graph_spec import NUMERIC_BOUND, numeric_action, random_observation
from agentic_ray.models import AAACModel, stack_observations
from tests.unit.models.helpers import TINY


def _obs_with_goals(goals: list[tuple[str, float]], seed: int = 0) -> dict[str, torch.Tensor]:
    """One random e-commerce-shaped observation whose first goal rows state ``(skill, share)`` targets; every
    other goal row states none."""
    spec, layout = ecommerce_specs()
    nt = spec.numeric_targets
    assert nt is not None and nt.skill_col is not None
    o = random_observation(spec, layout, np.random.default_rng(seed))
    x = o["goal_x"]
    x[:, nt.flag_col] = 0.0
    x[:, nt.skill_col : nt.skill_col + layout.num_skills] = 0.0
    o["goal_mask"][:] = 0
    o["goal_mask"][: max(len(goals), 1)] = 1
    for i, (skill, share) in enumerate(goals):
        x[i, nt.skill_col + layout.skill_index(skill)] = 1.0
        x[i, nt.flag_col] = 1.0
        x[i, nt.value_col] = 0.5 * (numeric_action(share) / NUMERIC_BOUND + 1.0)
    o["skill_mask"][:] = 1
    return stack_observations([o])


def _numeric_mean(model: AAACModel, obs: dict[str, torch.Tensor], skill: str) -> float:
    _spec, layout = ecommerce_specs()
    with torch.no_grad():
        logits = model.policy_heads(obs, model.encoder(obs))
    return float(logits["numeric_mean"][0, layout.skill_index(skill), 0])


@pytest.fixture(scope="module")
def models() -> tuple[AAACModel, AAACModel]:
    spec, layout = ecommerce_specs()
    torch.manual_seed(0)
    copy = AAACModel(spec, layout, TINY)
    torch.manual_seed(0)
    plain = AAACModel(spec, layout, TINY.model_copy(update={"copy_numeric_targets": False}))
    return copy, plain


def test_a_single_stated_target_is_copied_exactly_before_any_training(
    models: tuple[AAACModel, AAACModel],
) -> None:
    copy, _plain = models
    obs = _obs_with_goals([("coupon.issue", 9.0 / 49.0), ("refund.trigger", 1.0)])
    assert _numeric_mean(copy, obs, "coupon.issue") == pytest.approx(numeric_action(9.0 / 49.0), abs=1e-5)
    # A full refund states the clipped action 5.0.
    assert _numeric_mean(copy, obs, "refund.trigger") == pytest.approx(NUMERIC_BOUND, abs=1e-5)


def test_skills_without_a_stated_target_keep_the_regressed_mean(models: tuple[AAACModel, AAACModel]) -> None:
    copy, plain = models
    obs = _obs_with_goals([("refund.trigger", 0.3)])
    # Same weights (same seed; the copy layers are built after every shared one): coupon.issue has no target.
    assert _numeric_mean(copy, obs, "coupon.issue") == pytest.approx(
        _numeric_mean(plain, obs, "coupon.issue"), abs=1e-6
    )
    assert _numeric_mean(copy, obs, "refund.trigger") == pytest.approx(numeric_action(0.3), abs=1e-5)


def test_two_targets_for_one_skill_are_mixed_by_attention_and_the_choice_is_learnable() -> None:
    spec, layout = ecommerce_specs()
    torch.manual_seed(1)
    model = AAACModel(spec, layout, TINY)
    obs = _obs_with_goals([("coupon.issue", 0.2), ("coupon.issue", 0.6)])
    lo, hi = numeric_action(0.2), numeric_action(0.6)
    before = _numeric_mean(model, obs, "coupon.issue")
    assert lo - 1e-5 <= before <= hi + 1e-5
    # Fitting the copy attention alone moves the mean onto the second target (gradients reach the copy layers).
    heads = model.policy_heads
    params = [*heads.copy_query.parameters(), *heads.copy_key.parameters()]
    opt = torch.optim.Adam(params, lr=0.05)
    k = layout.skill_index("coupon.issue")
    with torch.no_grad():
        enc = model.encoder(obs)
    for _ in range(200):
        opt.zero_grad()
        loss = (heads(obs, enc)["numeric_mean"][0, k, 0] - hi) ** 2
        loss.backward()
        opt.step()
    assert _numeric_mean(model, obs, "coupon.issue") == pytest.approx(hi, abs=0.01)
