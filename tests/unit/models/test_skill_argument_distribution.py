"""The RLlib distribution wrapper: layout binding, mode, dict actions, errors."""

from __future__ import annotations

import pytest
import torch

from agentic_ray.graph_spec import toy_specs
from agentic_ray.models.skill_argument_distribution import (
    SkillArgumentDistribution,
    skill_argument_distribution_cls,
)
from agentic_ray.models.skill_argument_functional import PackedActionLayout, skill_argument_logp

_, LAYOUT = toy_specs()
PACKED = PackedActionLayout.from_action_layout(LAYOUT)


def test_bound_and_unbound_classes_agree() -> None:
    logits = torch.randn(9, PACKED.total_dim, generator=torch.Generator().manual_seed(0))
    bound = skill_argument_distribution_cls(LAYOUT)
    assert bound.required_input_dim(LAYOUT.action_space()) == PACKED.total_dim == 203
    a = bound.from_logits(logits)
    b = SkillArgumentDistribution.from_logits(logits, packed_layout=PACKED)
    torch.manual_seed(1)
    action = a.sample()
    torch.testing.assert_close(a.logp(action), b.logp(action))
    torch.testing.assert_close(a.logp(action), skill_argument_logp(PACKED.split(logits), PACKED, action))
    torch.manual_seed(2)  # the entropy of f.swap's ordered list is estimated along a draw
    h_a = a.entropy()
    torch.manual_seed(2)
    torch.testing.assert_close(h_a, b.entropy())
    for dist in (a, b):
        greedy = dist.to_deterministic()
        assert isinstance(greedy, type(dist)) and greedy.deterministic and not dist.deterministic
        first, second = greedy.sample(), greedy.sample()
        assert all(torch.equal(first[k], second[k]) for k in first)
        assert torch.equal(first["skill"], logits[:, : LAYOUT.num_skills].argmax(-1))


def test_rsample_carries_gradients_only_through_numeric() -> None:
    logits = torch.randn(64, PACKED.total_dim, requires_grad=True)
    sample = skill_argument_distribution_cls(LAYOUT).from_logits(logits).rsample()
    assert sample["numeric"].requires_grad and not sample["skill"].is_floating_point()
    sample["numeric"].sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_errors() -> None:
    logits = torch.zeros(2, PACKED.total_dim)
    with pytest.raises(ValueError):
        SkillArgumentDistribution.from_logits(logits)
    with pytest.raises(ValueError):
        skill_argument_distribution_cls(LAYOUT).from_logits(logits).sample(sample_shape=(3,))
    with pytest.raises(TypeError):
        skill_argument_distribution_cls(LAYOUT).from_logits(logits).kl(object())
