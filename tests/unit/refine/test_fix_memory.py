"""Step 4 of the refiner: error -> fix pairs in the memory store, keyed by cause and skill, read back."""

from __future__ import annotations

import pytest

from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.memory_store import MemoryStore
from agentic_ray.refine import RefineConfig, refine
from agentic_ray.refine.fix_memory import FIX_PREFIX, fix_pairs, read_fixes, write_fixes
from agentic_ray.text import SentenceEmbedder, get_embedder


@pytest.fixture(scope="module")
def embedder(tmp_path_factory) -> SentenceEmbedder:
    """The shipped sentence embedder, loaded here with Qdrant's local mode (once per process: ~7 s and ~4 s of
    imports, paid once by the memory tests too), so the test's own time is the refiner's."""
    e = get_embedder()
    e.encode(["load the model"])
    MemoryStore(MemoryConfig(path=str(tmp_path_factory.mktemp("warm"))), embedder=e).close()
    return e


def test_error_fix_pairs_are_stored_by_cause_and_skill_and_read_back(
    fresh_store, run_dir, tmp_path, embedder
) -> None:
    mem = tmp_path / "memory"
    rep = refine(fresh_store, run_dir, RefineConfig(max_alternatives=1, fix_memory=str(mem)), train=False)
    pairs = fix_pairs(rep.samples)
    assert rep.fix_pairs > 0 and pairs
    store = MemoryStore(MemoryConfig(path=str(mem)), embedder=embedder)
    try:
        p = pairs[0]
        back = read_fixes(store, p.cause, p.skill)
        assert [(b.cause, b.skill) for b in back] == [(p.cause, p.skill)] * len(back)
        assert p.fix_skill in {b.fix_skill for b in back}
        assert all(b.fix_skill != b.skill and b.fix_value > b.value for b in back)  # a fix, not the error
        assert read_fixes(store, "no_such_cause") == []
        distinct = {(q.cause, q.skill, q.fix_skill) for q in pairs}
        assert store.count() == rep.fix_pairs == len(distinct) < len(pairs)  # one memory per pair, not window
        # other windows of the same pairs (the last one wins) replace them, as a later refine run's would
        assert write_fixes(store, rep.samples[::-1]) == rep.fix_pairs and store.count() == len(distinct)
        hit = store.search(p.text(), FIX_PREFIX + p.cause, limit=1)[0]
        assert hit.record.episode == p.skill and hit.record.entities[0].id == p.fix_skill
    finally:
        store.close()


def test_stored_fixes_seed_the_fix_prior_the_reflection_stage_starts_from(
    fresh_store, run_dir, tmp_path, embedder
) -> None:
    import torch

    from agentic_ray.eval.policy_loading import load_policy_module
    from agentic_ray.refine.fix_memory import seed_from_store
    from tests.helpers.serving import save_untrained_module

    mem = tmp_path / "memory"
    rep = refine(fresh_store, run_dir, RefineConfig(max_alternatives=1, fix_memory=str(mem)), train=False)
    distinct = {(p.cause, p.skill, p.fix_skill) for p in fix_pairs(rep.samples)}
    module = load_policy_module(save_untrained_module(tmp_path / "policy"))
    model = module.model
    causes, skills = list(model.spec.root_causes), [s.name for s in model.layout.skills]

    def proposal(cause: str, skill: str) -> torch.Tensor:
        r = torch.zeros(1, len(causes))
        r[0, causes.index(cause)] = 1.0
        f = torch.zeros(1, len(skills))
        f[0, skills.index(skill)] = 1.0
        return model.fix_prior(r, f)[0]

    assert all(float(proposal(c, s).abs().max()) == 0.0 for c, s, _f in distinct)  # untrained: no proposal
    assert seed_from_store(module, mem) == (rep.fix_pairs, len(distinct))
    for c, s, fix in distinct:
        # the diagnosis of a stored cause after its failed skill now proposes the stored fix
        assert float(proposal(c, s)[skills.index(fix)]) == pytest.approx(3.0)
    assert seed_from_store(module, mem) == (rep.fix_pairs, 0)  # already there: nothing set twice
    assert seed_from_store(module, tmp_path / "no_store") == (0, 0)
