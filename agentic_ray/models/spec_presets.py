"""A graph/action spec with the shape the e-commerce domain will have, for benchmarks and sizing.

The real env will provide its own spec; :func:`benchmark_specs` prefers it when ``agentic_ray.envs.ecommerce``
exposes one and falls back to :func:`ecommerce_like_specs` otherwise.
"""

from __future__ import annotations

import importlib

from agentic_ray.envs.graph_spec import ActionLayout, GraphSpec, RelationSpec, SkillSlots

__all__ = ["benchmark_specs", "ecommerce_like_specs"]


def ecommerce_like_specs() -> tuple[GraphSpec, ActionLayout]:
    """Node maxima user 1, tool 13, product 6, order 3, session 1, goal 8; the relations of ``toy_specs()``.

    Edge maxima scale with the node maxima the way the toy spec's do; 13 skills with up to 2 pointer slots,
    1-2 enum slots (at most 4 choices), at most 2 numeric slots; 16 prototypes.

    Returns:
        ``(graph_spec, action_layout)``.
    """
    spec = GraphSpec(
        max_nodes={"user": 1, "tool": 13, "product": 6, "order": 3, "session": 1, "goal": 8},
        feat_dims={"user": 12, "tool": 16, "product": 14, "order": 14, "session": 12, "goal": 14},
        relations=(
            RelationSpec("user", "uses", "tool", 13),
            RelationSpec("tool", "operates", "product", 48),
            RelationSpec("product", "in", "session", 6),
            RelationSpec("tool", "depends", "tool", 20),
            RelationSpec("session", "of", "user", 1),
            RelationSpec("goal", "requires", "goal", 14),
            RelationSpec("goal", "needs", "tool", 16),
            RelationSpec("order", "contains", "product", 8),
        ),
    )
    layout = ActionLayout(
        skills=(
            SkillSlots("inventory.check", pointer_types=("product",)),
            SkillSlots("sms.send", pointer_types=("user",), enum_sizes=(4,)),
            SkillSlots("order.update_address", pointer_types=("order",), enum_sizes=(2,)),
            SkillSlots("order.cancel", pointer_types=("order",), enum_sizes=(3,)),
            SkillSlots("refund.trigger", pointer_types=("order",), enum_sizes=(3,), numeric_count=1),
            SkillSlots("express.contact", pointer_types=("order",), enum_sizes=(3, 2)),
            SkillSlots("waybill.generate", pointer_types=("order",)),
            SkillSlots("erp.sync", pointer_types=("order", "product")),
            SkillSlots("exchange.create", pointer_types=("order", "product"), enum_sizes=(3,)),
            SkillSlots("coupon.issue", pointer_types=("user",), enum_sizes=(4,), numeric_count=2),
            SkillSlots("product.recommend", pointer_types=("product", "user"), enum_sizes=(2, 4)),
            SkillSlots("human.handoff", enum_sizes=(4,)),
            SkillSlots("session.close"),
        ),
        max_pointer=6,
        num_prototypes=16,
        pointer_node_types=("user", "product", "order"),
        prototype_skills=tuple(i % 13 for i in range(16)),
    )
    return spec, layout


def benchmark_specs() -> tuple[GraphSpec, ActionLayout, str]:
    """The e-commerce env's own spec if ``agentic_ray.envs.ecommerce`` exposes one, else the look-alike.

    Returns:
        ``(graph_spec, action_layout, source)`` where ``source`` names where the spec came from.
    """
    try:
        ecommerce = importlib.import_module("agentic_ray.envs.ecommerce")
    except ImportError:
        return (*ecommerce_like_specs(), "ecommerce_like_specs")
    for name in ("ecommerce_specs", "graph_and_action_specs", "specs"):
        fn = getattr(ecommerce, name, None)
        if callable(fn):
            spec, layout = fn()
            if isinstance(spec, GraphSpec) and isinstance(layout, ActionLayout):
                return spec, layout, f"agentic_ray.envs.ecommerce.{name}"
    return (*ecommerce_like_specs(), "ecommerce_like_specs")
