"""Skill and argument masks: hard, soft and business rules, with the reason for every masked skill.

* **hard**: an entity argument with no known entity of its type to point at (a list with fewer than its minimum,
  or, when it may repeat an entity, none), a string copied from a revealed field (``source: <type>.<field>``)
  when no known entity has that field revealed (its pointer slot allows exactly those that do),
  a string argument copied from a request fact the request does not give, and the domain's own rules
  (:meth:`Domain.hard_rules`, from what is known, e.g. "no address change before verification");
* **soft**: the live error rate of a skill above its threshold, or an open breaker (executor SLA statistics),
  with a cool-down after which one probe is let through;
* **business**: contract preconditions on the call history, through the same functions the gateway uses
  (:mod:`agentic_ray.skills.preconditions`), so the mask and the gateway cannot disagree. A precondition that
  constrains an entity argument (``same``, a ``belongs_to`` owner or member) narrows that pointer or list slot's
  valid targets; with several constrained arguments the slots hold the projection of the joint rule and the env
  checks the chosen combination (:attr:`PreconditionTracker.joint`).

``safety`` preconditions are lifted in ``risk_mode: soft`` (the gateway lifts them too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import Domain, Task
from agentic_ray.graph_spec import ActionLayout
from agentic_ray.skills.contracts import DomainContracts, EntityListParam, EntityParam, StringParam
from agentic_ray.skills.preconditions import Call, PreconditionTracker

__all__ = ["MaskComputer", "Masks", "sla_arrays"]

_MEMO_MAX = 512
"""Entries of each of :class:`MaskComputer`'s memos of the knowledge part and the history-free business part
(cleared when full): a handful of node-count shapes recur across episodes."""


def sla_arrays(sla_stats: dict, skills: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Executor SLA statistics as per-skill arrays (skill order of the layout)."""
    a = np.array(
        [
            (
                x.p50_ms,
                x.p95_ms,
                x.error_rate,
                x.attempt_error_rate,
                x.calls,
                x.breaker_state == "open",
                x.breaker_state == "half_open",
            )
            for x in (sla_stats[s] for s in skills)
        ],
        dtype=np.float64,
    ).reshape(len(skills), 7)
    return {
        "p50": a[:, 0],
        "p95": a[:, 1],
        "error_rate": a[:, 2],
        "attempt_error_rate": a[:, 3],
        "calls": a[:, 4],
        "open": a[:, 5] > 0,
        "half_open": a[:, 6] > 0,
    }


@dataclass
class Masks:
    """One step's masks and the reasons behind them."""

    skill_mask: np.ndarray  # (K,) int8
    pointer_mask: np.ndarray  # (K, P, Mp + 1) int8
    list_mask: np.ndarray  # (K, L, Mp) int8
    hard: np.ndarray  # (K,) bool
    soft: np.ndarray  # (K,) bool
    reasons: dict[str, list[str]]
    business: np.ndarray | None = None  # (K,) bool: a business precondition fails for every target

    def as_obs(self) -> dict[str, np.ndarray]:
        return {"skill_mask": self.skill_mask, "pointer_mask": self.pointer_mask, "list_mask": self.list_mask}


@dataclass(frozen=True)
class _Structure:
    """The cached structural masks: pointer/list masks, hard and business flags, the skill mask without the soft
    part and the reasons of the skills it masks."""

    pm: np.ndarray
    lm: np.ndarray
    hard: np.ndarray
    business: np.ndarray
    mask: np.ndarray
    reasons: dict[str, list[str]]
    key: tuple[object, ...]


class MaskComputer:
    """Computes :class:`Masks` for one env's episodes (stateful: :meth:`reset` per episode, :meth:`add` per
    successful call).

    The structural part (hard and business masks, pointer and list masks, the reasons of the skills they mask)
    changes only when the history, the node order or the domain's hard rules do, so it is cached on those; the
    soft part is recomputed every step, vectorised over skills, and when no skill is soft-masked (no open breaker,
    no error rate over its threshold) the cached structure is the answer. Measured on e-commerce (random masked
    policy, ``benchmarks/env_throughput.py``): mask p50 0.087 ms -> 0.052 ms from these caches alone, and 0.037 ms
    with the reuse of an unchanged structure after a call that changed no outcome (help-desk 0.082 -> 0.072 ms:
    there 45% of steps reveal a new entity, which rebuilds the knowledge part and the business part).

    Args:
        domain: the domain (hard rules).
        contracts: its contracts (skill order = layout order).
        layout: the action layout.
        enforce_safety: False in ``risk_mode: soft`` (safety preconditions lifted).
        soft_error_rate: default live error-rate threshold of the soft mask (seed 002: 5%).
        soft_thresholds: per-skill overrides of the threshold.
        soft_min_calls: calls in the SLA window before the soft mask may apply.
        soft_cooldown_s: (simulated) seconds after a skill's last call when a soft-masked skill is let through
            again for one probe, so that a recovered tool can come back.
    """

    def __init__(
        self,
        domain: Domain,
        contracts: DomainContracts,
        layout: ActionLayout,
        *,
        enforce_safety: bool = True,
        soft_error_rate: float = 0.05,
        soft_thresholds: dict[str, float] | None = None,
        soft_min_calls: int = 5,
        soft_cooldown_s: float = 30.0,
    ) -> None:
        self.domain = domain
        self.contracts = contracts.skills
        self.layout = layout
        self.skills = tuple(c.name for c in contracts.skills)
        self.tracker = PreconditionTracker(self.contracts, enforce_safety=enforce_safety)
        self.threshold = np.array([(soft_thresholds or {}).get(s, soft_error_rate) for s in self.skills])
        self.soft_min_calls = soft_min_calls
        self.soft_cooldown_s = soft_cooldown_s
        # Per skill: (pointer slot, param name, node type, optional, constrained), (list slot, name, type, min),
        # request facts.
        self.pointers: list[list[tuple[int, str, str, bool, bool]]] = []
        self.lists: list[list[tuple[int, str, str, int]]] = []
        self.facts: list[list[str]] = []
        # Strings copied from a revealed field: (skill, pointer slot, name, node type, field, optional).
        self._copies: list[tuple[int, int, str, str, str, bool]] = []
        free: dict[str, list[tuple[int, int]]] = {}
        for i, c in enumerate(contracts.skills):
            pr: list[tuple[int, str, str, bool, bool]] = []
            ls: list[tuple[int, str, str, int]] = []
            fs: list[str] = []
            constrained = {p for pc in self.tracker.rules[i] for p in pc.constrained}
            n_ptr = 0  # pointer slots: entity arguments and copied strings, in contract order
            for name, p in c.input.items():
                if isinstance(p, StringParam) and p.copy_field is not None:
                    self._copies.append((i, n_ptr, name, *p.copy_field, not p.required))
                    n_ptr += 1
                elif isinstance(p, EntityParam):
                    slot = n_ptr
                    n_ptr += 1
                    pr.append((slot, name, p.node_type, not p.required, name in constrained))
                    if name not in constrained:
                        free.setdefault(p.node_type, []).append((i, slot))
                elif isinstance(p, EntityListParam):
                    lead = c.input.get(p.paired_with or "")
                    n = max(p.min_items, lead.min_items if isinstance(lead, EntityListParam) else 0)
                    # distinct entities the list needs: its length, or one when it may repeat an entity
                    ls.append((len(ls), name, p.node_type, n if p.unique else min(n, 1)))
                elif isinstance(p, StringParam) and p.request_fact and p.required:
                    fs.append(p.request_fact)
            self.pointers.append(pr)
            self.lists.append(ls)
            self.facts.append(fs)
        self._free = {t: (np.array([a for a, _ in v]), np.array([b for _, b in v])) for t, v in free.items()}
        self._optional = [
            (i, slot) for i, pr in enumerate(self.pointers) for slot, _n, _t, opt, _c in pr if opt
        ] + [(i, slot) for i, slot, _n, _t, _f, opt in self._copies if opt]
        # Skills that need at least one known entity of a type (a required pointer, or a list's minimum).
        need: dict[str, list[tuple[int, int, str]]] = {}
        for i, pr in enumerate(self.pointers):
            for _slot, name, nt, optional, _c in pr:
                if not optional:
                    need.setdefault(nt, []).append((i, 1, f"hard: no known {nt} for {name}"))
            for _slot, name, nt, lo in self.lists[i]:
                need.setdefault(nt, []).append((i, lo, f"hard: fewer than {lo} known {nt} for {name}"))
        self._need = need
        self._lists = [(i, slot, nt) for i, ls in enumerate(self.lists) for slot, _n, nt, _lo in ls]
        self._constrained = [
            (i, slot, name, nt, optional)
            for i, pr in enumerate(self.pointers)
            for slot, name, nt, optional, constrained in pr
            if constrained
        ]
        self._with_rules = [i for i, r in enumerate(self.tracker.rules) if r]
        self._constrained_of: dict[int, list[tuple[int, str, str, bool]]] = {}
        for i, slot, name, nt, optional in self._constrained:
            self._constrained_of.setdefault(i, []).append((slot, name, nt, optional))
        # List slots a precondition constrains (a `belongs_to` member): (slot, name, type, min members).
        self._constrained_lists: dict[int, list[tuple[int, str, str, int]]] = {
            i: [x for x in self.lists[i] if any(x[1] in pc.constrained for pc in self.tracker.rules[i])]
            for i in range(len(self.lists))
        }
        self._skill_index = {s: i for i, s in enumerate(self.skills)}
        self._fact_hard: dict[int, list[str]] = {}
        self._kkey: tuple[object, ...] | None = None
        self._kpart: tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, list[str]]] | None = None
        self._kversion: tuple[int, int] | None = None
        self._calm_key: object = None
        self._bkey: tuple[int, tuple[object, ...] | None] | None = None
        self._business = np.zeros(layout.num_skills, dtype=bool)
        self._bwhy: dict[int, list[str]] = {}
        self._cached: _Structure | None = None
        self._reasons_key: tuple[object, ...] | None = None
        self._reasons: dict[str, list[str]] = {}
        self._fact_key: tuple[object, ...] = ()
        self._fact_memo: dict[frozenset[str], tuple[dict[int, list[str]], tuple[object, ...]]] = {}
        self._kshape: tuple[object, ...] | None = None
        self._kmemo: dict[
            tuple[object, ...], tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, list[str]]]
        ] = {}
        self._fresh_memo: dict[
            tuple[object, ...], tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, list[str]]]
        ] = {}

    def reset(self, task: Task) -> None:
        """A new episode: empty history; the request's facts decide which copied strings exist."""
        self.tracker.reset()
        self._reasons_key = None
        self._kkey = self._kpart = self._bkey = self._cached = None
        self._kversion = None
        # A fact position past the values the request gives is left to decoding (INVALID_INPUT). What that
        # marks reads only which facts the request names, and requests name a few combinations: memoised on
        # them (rebuilding it was ~7 of the ~15 us of this reset on e-commerce, ~0.3% of env time). The memo's
        # dict and lists are only read (``_knowledge_arrays`` copies them).
        names = frozenset(task.request.facts)
        hit = self._fact_memo.get(names)
        if hit is None:
            fact_hard = {
                i: [f"hard: the request gives no {f}" for f in fs if f not in names]
                for i, fs in enumerate(self.facts)
                if any(f not in names for f in fs)
            }
            hit = (fact_hard, tuple((i, tuple(v)) for i, v in fact_hard.items()))
            if len(self._fact_memo) >= _MEMO_MAX:
                self._fact_memo.clear()
            self._fact_memo[names] = hit
        self._fact_hard, self._fact_key = hit

    def add(self, call: Call) -> None:
        """A successful, non-degraded call joined the history."""
        self.tracker.add(call)

    def _knowledge_part(
        self, knowledge: Knowledge, node_ids: dict[str, list[str]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, list[str]]]:
        """What depends only on what is known: free pointer targets, list candidates, hard rules.

        Cached on what it reads: the node order and the domain's hard rules. A reveal that only adds fields leaves
        both unchanged, so the cache (and the business part built on it) survives it; keying on the knowledge's
        version instead recomputed both on every reveal (~25 us of the ~90 us mask p50 on e-commerce).

        While the knowledge's version repeats (most steps: no reveal), the key cannot have changed, and it is not
        rebuilt: the node order comes from the knowledge and a domain's hard rules read only the knowledge (the
        protocol's contract). Building the key every step (the hard rules, the node order, the copyable fields)
        was ~3.4% of env time on e-commerce (py-spy, random masked policy).

        Memoised across episodes on the node counts (see :data:`_MEMO_MAX`): the arrays read how many entities of
        each type are known, which of them have a copied field revealed, the domain's hard rules and the request's
        missing facts, never the ids themselves; and with an empty history every precondition admits nothing, so
        the business part (:meth:`_structural`) marks every constrained target invalid and every skill with a
        precondition blocked, again from the counts alone. Episodes start from a few such shapes, and rebuilding
        both at every reset (the knowledge part after each new entity too) was ~4% of env time (py-spy, random
        masked policy, e-commerce and help-desk; reset's mask computation 104 -> 38 us). The memos hold read-only
        arrays and hand out copies, since the business part writes onto the pointer and list masks; the golden
        trajectories (tests/unit/envs/test_env_golden.py) and the rebuild test (test_env_caches.py) pin the result.
        """
        version = (id(knowledge), knowledge.version)
        if version == self._kversion and self._kpart is not None:
            return self._kpart
        self._kversion = version
        rules = self.domain.hard_rules(knowledge, self.skills)
        key: tuple[object, ...] = (tuple(tuple(v) for v in node_ids.values()), tuple(rules.items()))
        copyable: dict[tuple[str, str], tuple[bool, ...]] = {}
        if self._copies:  # which nodes a copied string may point at: those whose field is revealed
            copyable = {
                (t, f): tuple(isinstance(knowledge.fields(t, e).get(f), str) for e in node_ids.get(t, []))
                for _i, _s, _n, t, f, _o in self._copies
            }
            key += (tuple(copyable.items()),)  # a reveal of fields alone changes it
        if key == self._kkey and self._kpart is not None:
            return self._kpart
        # What follows reads the node counts, not the ids (see the docstring).
        shape = (tuple(len(v) for v in node_ids.values()), key[1:], self._fact_key)
        self._kshape = shape
        hit = self._kmemo.get(shape)
        if hit is None:
            hit = self._kmemo[shape] = self._knowledge_arrays(node_ids, rules, copyable)
            if len(self._kmemo) > _MEMO_MAX:
                self._kmemo.clear()
                self._kmemo[shape] = hit
        pm, lm, hard, why = hit
        # Copies: the business part writes its constrained targets onto these arrays (and hands them out).
        self._kkey, self._kpart = key, (pm.copy(), lm.copy(), hard.copy(), why)
        self._bkey = None  # constrained targets are rewritten on the fresh pointer mask
        return self._kpart

    def _knowledge_arrays(
        self,
        node_ids: dict[str, list[str]],
        rules: dict[str, str],
        copyable: dict[tuple[str, str], tuple[bool, ...]],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, list[str]]]:
        """The knowledge part's arrays and reasons from the node counts, the copyable fields and the hard rules
        (read-only: :meth:`_knowledge_part` hands out copies)."""
        lay = self.layout
        k, mp = lay.num_skills, lay.max_pointer
        pm = np.zeros((k, lay.pointer_slots, lay.pointer_choices), dtype=np.int8)
        lm = np.zeros((k, lay.list_slots, mp), dtype=np.int8)
        hard = np.zeros(k, dtype=bool)
        why: dict[int, list[str]] = {i: list(v) for i, v in self._fact_hard.items()}
        for i in why:
            hard[i] = True
        counts = {t: len(v) for t, v in node_ids.items()}
        for t, (ii, ss) in self._free.items():
            pm[ii, ss, : counts.get(t, 0)] = 1
        for i, slot in self._optional:
            pm[i, slot, mp] = 1
        for i, slot, nt in self._lists:
            lm[i, slot, : counts.get(nt, 0)] = 1
        for i, slot, name, nt, f, optional in self._copies:
            ok = copyable[(nt, f)]
            pm[i, slot, : len(ok)] = ok
            if not optional and not any(ok):
                hard[i] = True
                why.setdefault(i, []).append(f"hard: no known {nt} with a revealed {f} for {name}")
        for nt, rows in self._need.items():
            n = counts.get(nt, 0)
            for i, lo, reason in rows:
                if n < lo:
                    hard[i] = True
                    why.setdefault(i, []).append(reason)
        for s, r in rules.items():
            i = self._skill_index[s]
            hard[i] = True
            why.setdefault(i, []).append(r)
        pm.flags.writeable = lm.flags.writeable = hard.flags.writeable = False
        return pm, lm, hard, why

    def _structural(self, knowledge: Knowledge, node_ids: dict[str, list[str]]) -> _Structure:
        """Knowledge part plus the business part (preconditions on the history). After a call that revealed
        nothing, only the skills whose preconditions name the new call's skill are re-checked."""
        pm, lm, hard, kwhy = self._knowledge_part(knowledge, node_ids)
        n_hist = len(self.tracker.history)
        key = (n_hist, self._kkey)
        if key == self._bkey and self._cached is not None:
            return self._cached
        tr = self.tracker
        fresh = None  # with no history, the business part reads only the node counts (see _knowledge_part)
        if self._bkey is not None and self._bkey[1] == self._kkey and self._bkey[0] == n_hist - 1:
            last = tr.history[-1].skill
            redo = {i for i, _j in tr.by_skill.get(last, ())} | {i for i, _j in tr.by_bind.get(last, ())}
            business = self._business.copy()
            bwhy = dict(self._bwhy)
        elif (
            n_hist == 0
            and self._kshape is not None
            and (fresh := self._fresh_memo.get(self._kshape)) is not None
        ):
            pm[...], lm[...] = fresh[0], fresh[1]
            redo, business, bwhy = set(), fresh[2].copy(), dict(fresh[3])
        else:
            redo = set(self._with_rules)
            business = np.zeros(self.layout.num_skills, dtype=bool)
            bwhy = {}
        for i in redo:
            blocked = False
            pointers, lists = self._constrained_of.get(i, ()), self._constrained_lists.get(i, ())
            known = {name: node_ids.get(nt, []) for _s, name, nt, *_r in [*pointers, *lists]}
            for slot, name, nt, optional in pointers:
                ids = node_ids.get(nt, [])
                ok = tr.allowed(i, name, ids, known)
                if ok is not None and ids:
                    pm[i, slot, : len(ids)] = ok
                    if not optional and not any(ok):
                        blocked = True
            for slot, name, nt, lo in lists:
                ids = node_ids.get(nt, [])
                ok = tr.allowed(i, name, ids, known)
                if ok is not None and ids:
                    lm[i, slot, : len(ids)] = ok
                    if sum(ok) < lo:
                        blocked = True
            ok_pre, pre_why = tr.skill_ok(i)
            if not ok_pre or blocked:
                business[i] = True
                bwhy[i] = [f"business: {r}" for r in pre_why] or [
                    f"business: {self.skills[i]}: no known entity meets its precondition"
                ]
            else:
                business[i] = False
                bwhy.pop(i, None)
        if n_hist == 0 and fresh is None and self._kshape is not None:
            if len(self._fresh_memo) > _MEMO_MAX:
                self._fresh_memo.clear()
            self._fresh_memo[self._kshape] = (pm.copy(), lm.copy(), business.copy(), dict(bwhy))
        if (
            self._cached is not None
            and self._cached.pm is pm
            and bwhy == self._bwhy
            and business.tobytes() == self._business.tobytes()  # both (K,) bool: np.array_equal, ~60x cheaper
        ):  # the new call changed no outcome (the common case): the structure, and its key, stay
            self._bkey = key
            return self._cached
        blocked_all = hard | business
        named: dict[str, list[str]] = {}
        for i in np.flatnonzero(blocked_all).tolist():
            named[self.skills[i]] = kwhy.get(i, []) + bwhy.get(i, [])
        self._business, self._bwhy, self._bkey = business, bwhy, key
        self._cached = _Structure(pm, lm, hard, business, (~blocked_all).astype(np.int8), named, key)
        return self._cached

    def compute(
        self,
        knowledge: Knowledge,
        node_ids: dict[str, list[str]],
        sla: dict[str, np.ndarray],
        now: float,
        last_call_time: np.ndarray,
        sla_key: object = None,
    ) -> Masks:
        """The masks of the current state.

        Args:
            knowledge: what is known.
            node_ids: the observation's node order per entity type (pointer index -> id).
            sla: per-skill SLA arrays.
            now: executor clock time (soft-mask cool-down).
            last_call_time: ``(K,)`` clock time of each skill's last call.
            sla_key: a token that changes whenever ``sla`` does (None: no caching). While it repeats after an
                SLA state with no hot skill and no open breaker, that check is skipped: with none, time cannot
                soft-mask a skill (it was ~2.5% of env time on e-commerce, py-spy).
        """
        st = self._structural(knowledge, node_ids)
        if sla_key is not None and sla_key == self._calm_key:
            soft = np.zeros(self.layout.num_skills, dtype=bool)
            return Masks(st.mask.copy(), st.pm, st.lm, st.hard, soft, st.reasons, st.business)
        er, is_open = sla["error_rate"], sla["open"]
        over = er > self.threshold  # mostly none over: then the call counts need no comparison (~1 us a step)
        hot = over & (sla["calls"] >= self.soft_min_calls) if any(over.tolist()) else over
        # The common case: no soft mask, the structure decides (any() of the lists: .any() costs ~10x more here).
        if not (any(hot.tolist()) or any(is_open.tolist())):
            self._calm_key = sla_key
            soft = np.zeros(self.layout.num_skills, dtype=bool)
            return Masks(st.mask.copy(), st.pm, st.lm, st.hard, soft, st.reasons, st.business)
        self._calm_key = None
        soft = is_open | (hot & ((now - last_call_time) < self.soft_cooldown_s))
        mask = st.mask & ~soft
        rkey = (st.key, soft.tobytes(), is_open.tobytes(), er[soft].tobytes())
        if rkey == self._reasons_key:  # reasons change only with the structure or the soft mask
            return Masks(mask, st.pm, st.lm, st.hard, soft, self._reasons, st.business)
        reasons: dict[str, list[str]] = {}
        for i in np.flatnonzero(mask == 0).tolist():
            r = list(st.reasons.get(self.skills[i], ()))
            if soft[i]:
                r.append(
                    "soft: circuit breaker open"
                    if is_open[i]
                    else f"soft: live error rate {er[i]:.2f} > {self.threshold[i]:.2f}"
                )
            reasons[self.skills[i]] = r
        self._reasons_key, self._reasons = rkey, reasons
        return Masks(mask, st.pm, st.lm, st.hard, soft, reasons, st.business)
