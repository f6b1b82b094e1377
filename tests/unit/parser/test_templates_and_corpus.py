"""Goal templates learned from the domains' tasks, and the rendered corpus they are checked on (no embedder)."""

from __future__ import annotations

import pytest

from agentic_ray.domains import get_domain
from agentic_ray.domains.rendering import template_slots
from agentic_ray.parser.corpus import render_corpus, split_items
from agentic_ray.parser.dag_template import draw_tasks, known_goals, learn_templates
from agentic_ray.parser.train import domain_renderings

DOMAINS = ("ecommerce", "helpdesk")


@pytest.mark.parametrize("name", DOMAINS)
def test_known_goals_are_the_gold_dag_less_its_open_arguments(name: str) -> None:
    d = get_domain(name)
    rend = domain_renderings(d)
    templates = learn_templates(d, rend, n=12)
    for fam in d.families:
        for task in draw_tasks(d, fam, 3, seed=5):
            known = known_goals(templates, task, rend)
            assert [(g.id, g.skill, g.deps, g.priority, g.safety_check) for g in known] == [
                (g.id, g.skill, g.deps, g.priority, g.safety_check) for g in task.goals
            ]
            for k, g in zip(known, task.goals, strict=True):
                assert all(g.args[a] == v or list(g.args[a]) == v for a, v in k.args.items()), (k, g)
                assert k.hints == g.hints


def test_open_and_bound_arguments_on_ecommerce() -> None:
    d = get_domain("ecommerce")
    t = learn_templates(d, domain_renderings(d), n=12)
    address = {g.id: g for g in t.families["address_error"].goals}["address"]
    assert address.bound_args == {"order_id": "order", "source": "source"}
    verify = {g.id: g for g in t.families["address_error"].goals}["verify"]
    assert verify.bound_args == {} and verify.const_args == {}  # the user id is found by a lookup
    assert t.families["cancellation"].optional_slots == ("order",)
    assert t.composition is not None and t.composition.priority_offsets == (10, 0)


@pytest.mark.parametrize("name", DOMAINS)
def test_heldout_templates_never_reach_training(name: str) -> None:
    d = get_domain(name)
    rend = domain_renderings(d)
    train = render_corpus(d, rend, 4, "train")
    held = render_corpus(d, rend, 4, "heldout")
    for fam, temps in rend.templates.items():
        groups: dict[frozenset[str], list[str]] = {}
        for t in temps:
            groups.setdefault(frozenset(template_slots(t)), []).append(t)
        for g in groups.values():
            assert set(split_items(tuple(g), "train")).isdisjoint(split_items(tuple(g), "heldout"))
            assert split_items(tuple(g), "heldout"), (fam, g)
    for ex in train + held:
        for p in ex.pieces:
            if p.slot is not None and p.slot in rend.entity_slots:
                assert ex.turns[p.turn][p.start : p.end] == p.value
    held_texts = {"\n".join(e.turns) for e in held}
    assert not held_texts & {"\n".join(e.turns) for e in train}
