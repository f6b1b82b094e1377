"""The packed layout of the skill → arguments distribution's inputs: which slot of which skill sits where.

The policy emits one flat ``(B, D)`` vector per row (``action_dist_inputs``), so RLlib can store, batch and slice it
like any other distribution input. :class:`PackedActionLayout` says how it is cut (see
:mod:`agentic_ray.models.skill_argument_functional` for the maths on the parts): the skill logits, then the entity
slots packed per node type at that type's width and only for the slots some skill uses (pointer groups, set
groups, sequence slots), then enum, copy-source and numeric slots for every skill.

With numeric arguments conditioned on a pointer (:attr:`PackedActionLayout.numeric_anchor`), the numeric mean and
log-std of skill ``k`` are given for every candidate of its anchor pointer slot, in the action's index space
(``Mp + 1`` candidates, the last = left out): ``(K, N, Mp + 1)`` instead of ``(K, N)``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from agentic_ray.graph_spec import ActionLayout

__all__ = [
    "FOLLOWER_RANK",
    "LOG_STD_MAX",
    "LOG_STD_MIN",
    "PackedActionLayout",
    "PackedActionLogits",
    "PointerGroup",
    "SequenceSlot",
    "SetGroup",
    "masked_fill_value",
]

LOG_STD_MIN = -5.0
LOG_STD_MAX = 1.0
FOLLOWER_RANK = 8
"""``R``: rank of a follower's conditioning on its leader's member (see ``sequence_functional``)."""


def masked_fill_value(dtype: torch.dtype) -> float:
    """The logit given to masked choices: ``-1e9`` (or a quarter of the dtype's minimum for fp16).

    Large enough that ``exp`` underflows to 0, small enough that differences of two such values stay finite.
    """
    return max(-1e9, torch.finfo(dtype).min / 4)


@dataclass(frozen=True)
class PointerGroup:
    """The pointer slots over one node type, across skills: member ``n`` is slot ``slots[n]`` of skill
    ``skills[n]``; ``width + 1`` choices each (the last: left out)."""

    node_type: str
    width: int
    skills: tuple[int, ...]
    slots: tuple[int, ...]


@dataclass(frozen=True)
class SetGroup:
    """The list slots with set semantics over one node type, across skills, with their size bounds."""

    node_type: str
    width: int
    skills: tuple[int, ...]
    slots: tuple[int, ...]
    lo: tuple[int, ...]
    hi: tuple[int, ...]

    @property
    def levels(self) -> int:
        """The largest set size any member allows."""
        return max(self.hi)


@dataclass(frozen=True)
class SequenceSlot:
    """One list slot with sequence semantics: ``length`` positions over ``width`` candidates.

    ``leader`` is the index (in :attr:`PackedActionLayout.sequences`) of the slot it is paired with, or -1; a
    follower's length is its leader's (``lo``/``hi`` are then the leader's bounds), and ``lead_width`` is the width
    of the leader's type.
    """

    node_type: str
    width: int
    skill: int
    slot: int
    lo: int
    hi: int
    unique: bool
    leader: int = -1
    lead_width: int = 0

    @property
    def length(self) -> int:
        return self.hi

    def size(self, rank: int) -> int:
        base = self.length * (self.width + 1)
        return base + (self.lead_width + self.width) * rank if self.leader >= 0 else base


@dataclass(frozen=True)
class PackedActionLogits:
    """Views into a packed ``(B, D)`` logits vector.

    Attributes:
        skill: ``(B, K)``.
        pointers: per pointer group ``(B, n, W + 1)``.
        sets: per set group ``(B, n, W)``.
        seq_items: per sequence slot ``(B, T, W)``.
        seq_stop: per sequence slot ``(B, T)``.
        seq_lead: per sequence slot ``(B, W_leader, R)`` (followers only, else None).
        seq_own: per sequence slot ``(B, W, R)`` (followers only, else None).
        enum: ``(B, K, E, Me)``.
        source: ``(B, K, N, C1)``.
        numeric_mean: ``(B, K, N)``; ``(B, K, N, Mp + 1)`` with a numeric anchor (per candidate of the anchor
            pointer).
        numeric_log_std: as ``numeric_mean``, clamped to ``[LOG_STD_MIN, LOG_STD_MAX]``.
    """

    skill: torch.Tensor
    pointers: tuple[torch.Tensor, ...]
    sets: tuple[torch.Tensor, ...]
    seq_items: tuple[torch.Tensor, ...]
    seq_stop: tuple[torch.Tensor, ...]
    seq_lead: tuple[torch.Tensor | None, ...]
    seq_own: tuple[torch.Tensor | None, ...]
    enum: torch.Tensor
    source: torch.Tensor
    numeric_mean: torch.Tensor
    numeric_log_std: torch.Tensor

    def pointer_by_slot(self, layout: PackedActionLayout) -> torch.Tensor:
        """``(B, K, P, Mp + 1)``: the pointer logits in the action's index space (column ``Mp`` = left out; columns
        past a type's width and slots a skill does not use hold the masked value). For inspection and tests."""
        fill = masked_fill_value(self.skill.dtype)
        out = self.skill.new_full(
            (self.skill.shape[0], layout.num_skills, layout.pointer_slots, layout.max_pointer + 1), fill
        )
        for g, lg in zip(layout.pointer_groups, self.pointers, strict=True):
            for n, (k, p) in enumerate(zip(g.skills, g.slots, strict=True)):
                out[:, k, p, : g.width] = lg[:, n, : g.width]
                out[:, k, p, layout.max_pointer] = lg[:, n, g.width]
        return out

    def set_by_slot(self, layout: PackedActionLayout) -> torch.Tensor:
        """``(B, K, L, Mp)``: the per-candidate logits of set slots (everything else the masked value)."""
        fill = masked_fill_value(self.skill.dtype)
        out = self.skill.new_full(
            (self.skill.shape[0], layout.num_skills, layout.list_slots, layout.max_pointer), fill
        )
        for g, lg in zip(layout.set_groups, self.sets, strict=True):
            for n, (k, li) in enumerate(zip(g.skills, g.slots, strict=True)):
                out[:, k, li, : g.width] = lg[:, n]
        return out


@dataclass(frozen=True)
class PackedActionLayout:
    """Static sizes of the packed logits and which argument slots each skill uses.

    Attributes:
        num_skills: ``K``.
        pointer_slots: ``P`` (action width).
        list_slots / list_length: ``L`` / ``T`` (the ``members`` action is ``L × T``).
        max_pointer: ``Mp``, the left-out / end marker of actions.
        enum_slots / enum_choices: ``E`` / ``Me``.
        source_choices: ``C1``.
        numeric_slots: ``N``.
        pointer_groups, set_groups, sequences: the entity-argument slots, per node type (see the module docstring).
        enum_used, numeric_used: ``K`` rows of booleans per slot.
        rank: ``R`` of followers.
        numeric_anchor: empty (numeric arguments depend on the skill only), or per skill the pointer slot its
            numeric arguments are conditioned on (-1: none, they read the "left out" candidate): the mean and
            log-std are then given per candidate of that slot and taken at the pointer the action chose.
        anchor_width: per skill, the width of its anchor slot's node type (0 without an anchor).
    """

    num_skills: int
    pointer_slots: int
    list_slots: int
    list_length: int
    max_pointer: int
    enum_slots: int
    enum_choices: int
    source_choices: int
    numeric_slots: int
    pointer_groups: tuple[PointerGroup, ...]
    set_groups: tuple[SetGroup, ...]
    sequences: tuple[SequenceSlot, ...]
    enum_used: tuple[tuple[bool, ...], ...]
    numeric_used: tuple[tuple[bool, ...], ...]
    rank: int = FOLLOWER_RANK
    numeric_anchor: tuple[int, ...] = ()
    anchor_width: tuple[int, ...] = ()

    @classmethod
    def from_action_layout(
        cls, layout: ActionLayout, rank: int = FOLLOWER_RANK, numeric_on_pointer: bool = False
    ) -> PackedActionLayout:
        """Derives the packed layout from the env's :class:`ActionLayout`.

        Args:
            layout: The env's action layout.
            rank: ``R`` of followers.
            numeric_on_pointer: Condition each skill's numeric arguments on its first pointer slot (a skill with
                numeric arguments and no pointer slot keeps one value per slot). Without any such skill the
                layout stays unconditioned.
        """
        anchor: tuple[int, ...] = ()
        widths: tuple[int, ...] = ()
        if numeric_on_pointer and any(s.numeric_count and s.pointer_types for s in layout.skills):
            anchor = tuple(0 if s.numeric_count and s.pointer_types else -1 for s in layout.skills)
            widths = tuple(
                layout.width(s.pointer_types[0]) if a == 0 else 0
                for s, a in zip(layout.skills, anchor, strict=True)
            )
        e, n = layout.enum_slots, layout.numeric_slots
        ptr: dict[str, list[tuple[int, int]]] = {}
        sets: dict[str, list[tuple[int, int, int, int]]] = {}
        leaders: list[SequenceSlot] = []
        followers: list[tuple[int, int]] = []
        for k, s in enumerate(layout.skills):
            for p, t in enumerate(s.pointer_types):
                ptr.setdefault(t, []).append((k, p))
            for li, t in enumerate(s.list_types):
                lo = s.list_bounds[li][0]
                if not s.is_sequence(li):
                    sets.setdefault(t, []).append((k, li, lo, layout.list_max(s, li)))
                elif s.leader(li) >= 0:
                    followers.append((k, li))
                else:
                    leaders.append(
                        SequenceSlot(t, layout.width(t), k, li, lo, layout.list_max(s, li), s.unique(li))
                    )
        seqs = list(leaders)
        for k, li in followers:
            s = layout.skills[k]
            lead_i = next(i for i, q in enumerate(leaders) if (q.skill, q.slot) == (k, s.leader(li)))
            lead = leaders[lead_i]
            t = s.list_types[li]
            seqs.append(
                SequenceSlot(t, layout.width(t), k, li, lead.lo, lead.hi, s.unique(li), lead_i, lead.width)
            )
        return cls(
            num_skills=layout.num_skills,
            pointer_slots=layout.pointer_slots,
            list_slots=layout.list_slots,
            list_length=layout.list_length,
            max_pointer=layout.max_pointer,
            enum_slots=e,
            enum_choices=layout.enum_max,
            source_choices=layout.num_sources + 1,
            numeric_slots=n,
            pointer_groups=tuple(
                PointerGroup(t, layout.width(t), tuple(k for k, _ in v), tuple(p for _, p in v))
                for t, v in ptr.items()
            ),
            set_groups=tuple(
                SetGroup(t, layout.width(t), *(tuple(x[i] for x in v) for i in range(4)))
                for t, v in sets.items()
            ),
            sequences=tuple(seqs),
            enum_used=tuple(tuple(i < len(s.enum_sizes) for i in range(e)) for s in layout.skills),
            numeric_used=tuple(tuple(i < s.numeric_count for i in range(n)) for s in layout.skills),
            rank=rank,
            numeric_anchor=anchor,
            anchor_width=widths,
        )

    @property
    def numeric_candidates(self) -> int:
        """How many (mean, log-std) pairs each numeric slot of each skill has: ``Mp + 1`` with an anchor, else 1."""
        return self.max_pointer + 1 if self.numeric_anchor else 1

    @property
    def sizes(self) -> tuple[int, ...]:
        """Widths of the packed segments, in order (see the module docstring)."""
        k = self.num_skills
        return (
            k,
            *(len(g.skills) * (g.width + 1) for g in self.pointer_groups),
            *(len(g.skills) * g.width for g in self.set_groups),
            *(q.size(self.rank) for q in self.sequences),
            k * self.enum_slots * self.enum_choices,
            k * self.numeric_slots * self.source_choices,
            k * self.numeric_slots * self.numeric_candidates,
            k * self.numeric_slots * self.numeric_candidates,
        )

    @property
    def total_dim(self) -> int:
        """``D``, the width of ``action_dist_inputs``."""
        return sum(self.sizes)

    def used_masks(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K, E)`` and ``(K, N)`` float used-slot masks (cached per device, so the training loop does not copy
        them host → device every step)."""
        return _used_masks(self, torch.device(device))

    def group_index(self, device: torch.device) -> _GroupIndex:
        """Index tensors of the pointer and set groups (cached per device)."""
        return _group_index(self, torch.device(device))

    def split(self, logits: torch.Tensor) -> PackedActionLogits:
        """Splits ``(..., D)`` packed logits into their parts (views, no copy except the log_std clamp)."""
        k = self.num_skills
        chunks = list(torch.split(logits, list(self.sizes), dim=-1))
        lead = logits.shape[:-1]
        skill = chunks.pop(0)
        pointers = tuple(
            chunks.pop(0).reshape(*lead, len(g.skills), g.width + 1) for g in self.pointer_groups
        )
        sets = tuple(chunks.pop(0).reshape(*lead, len(g.skills), g.width) for g in self.set_groups)
        items: list[torch.Tensor] = []
        stop: list[torch.Tensor] = []
        lead_f: list[torch.Tensor | None] = []
        own_f: list[torch.Tensor | None] = []
        for q in self.sequences:
            c = chunks.pop(0)
            t, w, r = q.length, q.width, self.rank
            items.append(c[..., : t * w].reshape(*lead, t, w))
            stop.append(c[..., t * w : t * (w + 1)])
            if q.leader >= 0:
                off = t * (w + 1)
                lead_f.append(c[..., off : off + q.lead_width * r].reshape(*lead, q.lead_width, r))
                own_f.append(c[..., off + q.lead_width * r :].reshape(*lead, w, r))
            else:
                lead_f.append(None)
                own_f.append(None)
        enum, src, mean, log_std = chunks
        num_shape = (k, self.numeric_slots) + ((self.numeric_candidates,) if self.numeric_anchor else ())
        return PackedActionLogits(
            skill=skill,
            pointers=pointers,
            sets=sets,
            seq_items=tuple(items),
            seq_stop=tuple(stop),
            seq_lead=tuple(lead_f),
            seq_own=tuple(own_f),
            enum=enum.reshape(*lead, k, self.enum_slots, self.enum_choices),
            source=src.reshape(*lead, k, self.numeric_slots, self.source_choices),
            numeric_mean=mean.reshape(*lead, *num_shape),
            numeric_log_std=log_std.reshape(*lead, *num_shape).clamp(LOG_STD_MIN, LOG_STD_MAX),
        )


@dataclass(frozen=True)
class _GroupIndex:
    pointer: tuple[tuple[torch.Tensor, torch.Tensor], ...]  # (skills, slots) per pointer group
    sets: tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], ...]  # skills, slots, lo, hi
    anchor: torch.Tensor  # (K,) each skill's numeric anchor slot (-1: none; empty without anchors)
    anchor_width: torch.Tensor  # (K,) the width of its node type


@functools.lru_cache(maxsize=64)
def _used_masks(layout: PackedActionLayout, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.inference_mode(False):  # cached for the process: see _group_index
        return _used_masks_now(layout, device)


def _used_masks_now(layout: PackedActionLayout, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.tensor(layout.enum_used, dtype=torch.float32, device=device).reshape(
            layout.num_skills, layout.enum_slots
        ),
        torch.tensor(layout.numeric_used, dtype=torch.float32, device=device).reshape(
            layout.num_skills, layout.numeric_slots
        ),
    )


@functools.lru_cache(maxsize=64)
def _group_index(layout: PackedActionLayout, device: torch.device) -> _GroupIndex:
    # Cached for the process: built outside inference mode even when the first call is a served decision
    # (PolicyRunner runs under torch.inference_mode), else a later training step in the same process (refine,
    # a test session) fails with "Inference tensors cannot be saved for backward".
    def t(v: tuple[int, ...]) -> torch.Tensor:
        with torch.inference_mode(False):
            return torch.tensor(v, dtype=torch.long, device=device)

    return _GroupIndex(
        pointer=tuple((t(g.skills), t(g.slots)) for g in layout.pointer_groups),
        sets=tuple((t(g.skills), t(g.slots), t(g.lo), t(g.hi)) for g in layout.set_groups),
        anchor=t(layout.numeric_anchor),
        anchor_width=t(layout.anchor_width),
    )
