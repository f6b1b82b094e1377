"""Forward+backward time of the list head per 64-row minibatch, new against old, at pointer widths 8 to 128.

Issue 26: the old list head (exact set maths with a loop over candidates and a leave-one-out table per candidate,
every list slot of every skill as wide as the widest node type) cost the cube of the width per row, skill and
slot, twice in the AAAC loss (entropy and KL): 0.19 s at width 8, 4.2 s at 32 and 80 s at 64 per 64-row minibatch
in a third-party domain. The new one packs each slot at its own type's width, only for the slots a skill uses, and
costs ``O(width · max_items²)`` for a set and ``O(width · max_items)`` for a sequence.

Prints one JSON line per (head, width): ``{"benchmark": "list_head", "head", "width", "ms_fwd_bwd" (median over
``--repeats`` rounds; the new heads run once per round at every width, so load that drifts hits every width
alike), "cpu_ms_fwd_bwd", ...}`` and a summary line per new head with its time at width 64 over width 8 (the
issue's goal: within 2x), recorded in ``benchmarks/results/list_head.json``. What is timed is the list part of the AAAC loss on one minibatch: ``logp`` of sampled
actions, the entropy and ``KL(behaviour ‖ current)``, summed, then ``backward()``, for a layout of ``--skills``
skills of which three take lists of one entity type of the given width (``max_items`` 8 for the set, the
contracts' default, and 4 for the others):

* ``old``: the pre-issue-26 maths (``agentic_ray/models/set_functional.py`` at ``edbddae``, copied below as it
  was), over the old packing ``(B, K, L, W)``; every list is a set (the old head had no other kind);
* ``new_sets``: the new head on the same layout, every list a set (like for like);
* ``new_mixed``: the new head with the lists as the contracts of issue 26 can say them: a set, an ordered list with
  repeats and its paired follower, and an ordered list without repeats (whose entropy and KL are one-sample
  estimates along a drawn sequence, see ``models/sequence_functional.py``). The new ``skill_argument_*`` functions
  run whole: pointers and enums of the other skills are in the time too (the old line has the list part only).

The old head is skipped at a width when its predicted time or memory (the cube of the width from the last
measured one) exceeds ``--old-budget-s`` or ``--old-budget-gb``; the line says so. Timings are wall-clock (and
process CPU) at ``torch.set_num_threads(--threads)``: on a shared machine other jobs add noise, so compare ratios
within one run.

Run from the repository root: ``python benchmarks/list_head.py [--widths 8 32 64 128] [--repeats 7]``. Not part of
the test run.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentic_ray.graph_spec import ActionLayout, SkillSlots
from agentic_ray.models.skill_argument_functional import (
    PackedActionLayout,
    skill_argument_entropy,
    skill_argument_kl,
    skill_argument_logp,
    skill_argument_sample,
)

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

ROWS = 64
LIST_TYPE = "item"


# ------------------------------------------------------------------ the old set maths, verbatim (edbddae)
def _neg(t: torch.Tensor) -> float:
    return max(-1e9, torch.finfo(t.dtype).min / 4)


def _step(e: torch.Tensor, logit: torch.Tensor, neg: float) -> torch.Tensor:
    """One candidate more: ``e'_j = logaddexp(e_j, e_{j-1} + logit)``."""
    pad = torch.full_like(e[..., :1], neg)
    return torch.logaddexp(e, torch.cat([pad, e[..., :-1] + logit], dim=-1))


def _empty(shape: torch.Size, m: int, like: torch.Tensor, neg: float) -> torch.Tensor:
    e = torch.full((*shape, m + 1), neg, dtype=like.dtype, device=like.device)
    e[..., 0] = 0.0
    return e


def _elementary(logits: torch.Tensor) -> torch.Tensor:
    """``(..., M + 1)``: ``E_j = log Σ_{|S| = j} exp(Σ_{i∈S} l_i)``."""
    neg, m = _neg(logits), logits.shape[-1]
    e = _empty(logits.shape[:-1], m, logits, neg)
    for i in range(m):
        e = _step(e, logits[..., i : i + 1], neg)
    return e


def _in_range(lo: torch.Tensor, hi: torch.Tensor, m: int, like: torch.Tensor) -> torch.Tensor:
    j = torch.arange(m + 1, device=like.device)
    return (j >= lo.unsqueeze(-1)) & (j <= hi.unsqueeze(-1))


def _bounds(
    logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int
) -> tuple[torch.Tensor, torch.Tensor]:
    shape = logits.shape[:-1]
    lo_t = torch.as_tensor(lo, device=logits.device).expand(shape)
    hi_t = torch.as_tensor(hi, device=logits.device).clamp(max=logits.shape[-1]).expand(shape)
    return lo_t, hi_t


def set_log_partition(logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """``A`` of shape ``(...)``."""
    lo_t, hi_t = _bounds(logits, lo, hi)
    e = _elementary(logits)
    return e.masked_fill(~_in_range(lo_t, hi_t, logits.shape[-1], logits), _neg(logits)).logsumexp(-1)


def set_logp(
    logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int, members: torch.Tensor
) -> torch.Tensor:
    """``log q(S)`` for the 0/1 ``members`` ``(..., M)`` (sizes outside ``[lo, hi]`` get the masked value)."""
    lo_t, hi_t = _bounds(logits, lo, hi)
    x = members.to(logits.dtype)
    n = x.sum(-1)
    lp = (x * logits).sum(-1) - set_log_partition(logits, lo_t, hi_t)
    return torch.where((n >= lo_t) & (n <= hi_t), lp, torch.full_like(lp, _neg(logits)))


def set_marginals(logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """``μ (..., M)``: the probability that each candidate is in the set."""
    neg, m = _neg(logits), logits.shape[-1]
    lo_t, hi_t = _bounds(logits, lo, hi)
    lead = logits.shape[:-1]
    prefix = [_empty(lead, m, logits, neg)]
    for i in range(m):
        prefix.append(_step(prefix[-1], logits[..., i : i + 1], neg))
    suffix = [_empty(lead, m, logits, neg)]
    for i in reversed(range(m)):
        suffix.append(_step(suffix[-1], logits[..., i : i + 1], neg))
    suffix = suffix[::-1]  # suffix[i]: candidates i .. M-1
    keep = _in_range(lo_t - 1, hi_t - 1, m, logits)  # counts j of the OTHERS for which i can join
    a = set_log_partition(logits, lo_t, hi_t)
    mus = []
    for i in range(m):
        p, q = prefix[i], suffix[i + 1]
        # others_j = log Σ_{a + b = j} exp(p_a + q_b)
        shifted = torch.stack(
            [
                torch.cat([torch.full_like(q[..., :s], neg), q[..., : m + 1 - s]], dim=-1)
                for s in range(m + 1)
            ],
            dim=-2,
        )  # (..., a, j) = q_{j - a}
        others = (p.unsqueeze(-1) + shifted).logsumexp(-2)
        joined = others.masked_fill(~keep, neg).logsumexp(-1) + logits[..., i]
        mus.append((joined - a).exp())
    return torch.stack(mus, dim=-1)


def set_entropy(logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int) -> torch.Tensor:
    """``H(q)`` of shape ``(...)``."""
    return set_log_partition(logits, lo, hi) - (set_marginals(logits, lo, hi) * logits).sum(-1)


def set_kl(
    p_logits: torch.Tensor, q_logits: torch.Tensor, lo: torch.Tensor | int, hi: torch.Tensor | int
) -> torch.Tensor:
    """``KL(q_p ‖ q_q)`` for two logit vectors with the same bounds."""
    mu = set_marginals(p_logits, lo, hi)
    return (
        (mu * (p_logits - q_logits)).sum(-1)
        - set_log_partition(p_logits, lo, hi)
        + set_log_partition(q_logits, lo, hi)
    )


# ------------------------------------------------------------------ layouts
def layout(width: int, skills: int, mixed: bool) -> ActionLayout:
    """``skills`` skills; three take lists of ``LIST_TYPE`` (``width`` nodes): a set (1..8), a pair of lists (1..4)
    and a list of 1..4 (an ordered list with repeats and its follower, and an ordered list without repeats, when
    ``mixed``; sets otherwise). The others point at a small type and take an enum."""
    lists = [
        SkillSlots("s.return", list_types=(LIST_TYPE,), list_bounds=((1, 8),)),
        SkillSlots(
            "s.exchange",
            list_types=(LIST_TYPE, LIST_TYPE),
            list_bounds=((1, 4), (1, 4)),
            list_ordered=(True, True) if mixed else (),
            list_unique=(False, False) if mixed else (),
            list_paired=(-1, 0) if mixed else (),
        ),
        SkillSlots(
            "s.rank", list_types=(LIST_TYPE,), list_bounds=((1, 4),), list_ordered=(True,) if mixed else ()
        ),
    ]
    other = [SkillSlots(f"s.other{i}", pointer_types=("small",), enum_sizes=(3,)) for i in range(skills - 3)]
    return ActionLayout(
        skills=tuple(lists + other),
        max_pointer=width,
        pointer_node_types=(LIST_TYPE, "small"),
        type_widths=((LIST_TYPE, width), ("small", min(4, width))),
    )


def new_step(lay: ActionLayout, gen: torch.Generator) -> Callable[[], torch.Tensor]:
    """One minibatch of the new head's loss terms (returns the loss to backpropagate)."""
    pk = PackedActionLayout.from_action_layout(lay)
    behaviour = torch.randn(ROWS, pk.total_dim, generator=gen)
    with torch.no_grad():
        action = skill_argument_sample(pk.split(behaviour), pk)
    current = (behaviour + 0.1 * torch.randn(ROWS, pk.total_dim, generator=gen)).requires_grad_(True)

    def step() -> torch.Tensor:
        p, mu = pk.split(current), pk.split(behaviour)
        return (
            skill_argument_logp(p, pk, action).sum()
            + skill_argument_entropy(p, pk).sum()
            + skill_argument_kl(mu, p, pk).sum()
        )

    return step


def old_step(lay: ActionLayout, gen: torch.Generator) -> Callable[[], torch.Tensor]:
    """The old head's list terms: every skill's every list slot, padded to the widest type (unused slots with
    bounds ``(0, width)``, as the old ``PackedActionLayout.list_lo/list_hi`` had them), weighted by the used
    masks, with a sampled skill and a set of a size within its bounds for ``logp``."""
    k, lt, mp = lay.num_skills, lay.list_slots, lay.max_pointer
    lo = torch.tensor(
        [[s.list_bounds[i][0] if i < len(s.list_types) else 0 for i in range(lt)] for s in lay.skills]
    )
    hi = torch.tensor(
        [
            [min(s.list_bounds[i][1], mp) if i < len(s.list_types) else mp for i in range(lt)]
            for s in lay.skills
        ]
    )
    used = torch.tensor([[float(i < len(s.list_types)) for i in range(lt)] for s in lay.skills])
    skill_logits = torch.randn(ROWS, k, generator=gen)
    behaviour = torch.randn(ROWS, k, lt, mp, generator=gen)
    current = (behaviour + 0.1 * torch.randn(ROWS, k, lt, mp, generator=gen)).requires_grad_(True)
    skill = torch.multinomial(skill_logits.softmax(-1), 1, generator=gen).squeeze(-1)
    members = torch.zeros(ROWS, lt, mp)
    for b in range(ROWS):
        for i in range(lt):
            n = (int(lo[skill[b], i]) + int(hi[skill[b], i])) // 2
            members[b, i, torch.randperm(mp, generator=gen)[:n]] = 1
    p_skill = skill_logits.softmax(-1)

    def step() -> torch.Tensor:
        rows = torch.arange(ROWS)
        lp = set_logp(current[rows, skill], lo[skill], hi[skill], members) * used[skill]
        h = (set_entropy(current, lo, hi) * used).sum(-1)
        kl = (set_kl(behaviour, current, lo, hi) * used).sum(-1)
        return lp.sum() + (p_skill * h).sum() + (p_skill * kl).sum()

    return step


def time_once(step: Callable[[], torch.Tensor]) -> tuple[float, float]:
    """Wall and CPU ms of one ``step().backward()``."""
    t0, c0 = time.perf_counter(), time.process_time()
    step().backward()
    return (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[8, 32, 64, 128])
    ap.add_argument("--skills", type=int, default=12, help="skills in the layout (three take lists)")
    ap.add_argument("--repeats", type=int, default=7, help="rounds over every new head and width")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument(
        "--old-budget-s", type=float, default=600.0, help="skip the old head past this predicted time"
    )
    ap.add_argument(
        "--old-budget-gb", type=float, default=6.0, help="... or past this predicted memory growth"
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    common: dict[str, Any] = {
        "benchmark": "list_head",
        "rows": ROWS,
        "skills": args.skills,
        "threads": args.threads,
    }
    # New heads: every (head, width) once per round, rounds repeated, medians: load that drifts over the run
    # (a shared machine) hits every width alike.
    steps = {
        (head, w): new_step(layout(w, args.skills, mixed), torch.Generator().manual_seed(w))
        for w in args.widths
        for head, mixed in (("new_sets", False), ("new_mixed", True))
    }
    times: dict[tuple[str, int], list[tuple[float, float]]] = {key: [] for key in steps}
    for step in steps.values():  # warm-up
        time_once(step)
    for _ in range(args.repeats):
        for key, step in steps.items():
            times[key].append(time_once(step))
    med = {key: tuple(statistics.median(t[i] for t in v) for i in range(2)) for key, v in times.items()}
    lines: list[dict[str, Any]] = []
    for (head, w), (ms, cpu) in med.items():
        lines.append({**common, "head": head, "width": w, "ms_fwd_bwd": round(ms, 2),
                      "cpu_ms_fwd_bwd": round(cpu, 2), "repeats": args.repeats})  # fmt: skip
    last_old: tuple[int, float, float] | None = None  # width, seconds, GB
    for w in args.widths:
        if last_old is not None:
            scale = (w / last_old[0]) ** 3
            est_s, est_gb = last_old[1] * scale, last_old[2] * scale
            if est_s > args.old_budget_s or est_gb > args.old_budget_gb:
                reason = (
                    f"predicted {est_s:.0f} s and {est_gb:.1f} GB per minibatch (the cube of the width from width "
                    f"{last_old[0]}), past --old-budget-s {args.old_budget_s:g} or --old-budget-gb {args.old_budget_gb:g}"
                )
                lines.append({**common, "head": "old", "width": w, "skipped": True, "reason": reason})
                continue
        step = old_step(layout(w, args.skills, False), torch.Generator().manual_seed(w))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        reps = args.repeats if last_old is None or last_old[1] * (w / last_old[0]) ** 3 < 5 else 1
        if reps > 1:
            time_once(step)  # warm-up
        runs = [time_once(step) for _ in range(reps)]
        ms, cpu = (statistics.median(r[i] for r in runs) for i in range(2))
        grew_gb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, 0) / 2**20
        last_old = (w, ms / 1e3, max(grew_gb, 1e-3))
        lines.append({**common, "head": "old", "width": w, "ms_fwd_bwd": round(ms, 2), "cpu_ms_fwd_bwd":
                      round(cpu, 2), "repeats": reps, "peak_rss_growth_gb": round(grew_gb, 2)})  # fmt: skip
        print(f"# old head at width {w}: {ms:.0f} ms", file=sys.stderr, flush=True)
    # One summary per new head: the sets head is like for like with the old one, the mixed head is what the
    # contracts of issue 26 can say; the goal holds only if both meet it.
    for head in ("new_sets", "new_mixed"):
        if (head, 8) in med and (head, 64) in med:
            wall, cpu = (med[(head, 64)][i] / med[(head, 8)][i] for i in range(2))
            lines.append({**common, "summary": f"{head} at width 64 / at width 8", "head": head,
                          "ratio_wall": round(wall, 2), "ratio_cpu": round(cpu, 2), "goal": "<= 2",
                          "met": max(wall, cpu) <= 2.0})  # fmt: skip
    publish("list_head", lines, argv=sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
