"""Pure tensor maths of the autoregressive skill → arguments distribution (no Ray).

The policy emits one flat vector per row (``action_dist_inputs``) that holds the skill logits and, for EVERY skill
``k``, the logits of the arguments that skill would take::

    [ skill (K) | pointer (K·P·Mp1) | members (K·L·Mp) | enum (K·E·Me) | source (K·N·C1)
      | numeric mean (K·N) | numeric log_std (K·N) ]

``K`` skills; ``P`` pointer slots of ``Mp1 = max_pointer + 1`` choices (the last = the argument is left out);
``L`` list slots over ``Mp`` candidates, each a set with size in ``[lo, hi]`` of its skill
(:mod:`agentic_ray.models.set_functional`); ``E`` enum slots of ``Me`` choices; ``N`` numeric slots, each with a
copy-source choice of ``C1 = C + 1`` (0 = a free value, ``c + 1`` = copy source ``c``) and a Gaussian free value.
Sampling draws the skill first, then the arguments of that skill only. Given the skill, argument slots are
independent, only the slots the skill uses count, and a numeric slot's Gaussian counts only when it is free::

    logp(a)  = log p(k) + Σ_{used slots i of k} log p(arg_i | k),
               log p(numeric_n | k) = log p(src_n | k) + 1[src_n = 0] · log N(x_n; μ, σ)
    H        = H(skill) + Σ_k p(k) · Σ_{used i of k} H(arg_i | k),   H(numeric_n) = H(src_n) + p(free)·H(N)
    KL(p‖q)  = KL(skill) + Σ_k p(k) · Σ_{used i of k} KL(arg_i | k), KL(numeric_n) = KL(src) + p(free)·KL(N)

All are exact. Masked choices carry a large finite negative logit (:func:`masked_fill_value`), so every quantity
stays finite: their probability underflows to exactly 0 and ``0 · finite = 0``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from agentic_ray.graph_spec import ActionLayout
from agentic_ray.models.set_functional import set_entropy, set_kl, set_logp, set_mode, set_sample

__all__ = [
    "LOG_STD_MAX",
    "LOG_STD_MIN",
    "PackedActionLayout",
    "PackedActionLogits",
    "masked_fill_value",
    "sigma_scaled_mean",
    "skill_argument_entropy",
    "skill_argument_kl",
    "skill_argument_logp",
    "skill_argument_mode",
    "skill_argument_sample",
]

LOG_STD_MIN = -5.0
LOG_STD_MAX = 1.0
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def masked_fill_value(dtype: torch.dtype) -> float:
    """The logit given to masked choices: ``-1e9`` (or a quarter of the dtype's minimum for fp16).

    Large enough that ``exp`` underflows to 0, small enough that differences of two such values stay finite.
    """
    return max(-1e9, torch.finfo(dtype).min / 4)


@dataclass(frozen=True)
class PackedActionLogits:
    """Views into a packed ``(B, D)`` logits vector.

    Attributes:
        skill: ``(B, K)``.
        pointer: ``(B, K, P, Mp1)``.
        members: ``(B, K, L, Mp)`` per-candidate set logits.
        enum: ``(B, K, E, Me)``.
        source: ``(B, K, N, C1)``.
        numeric_mean: ``(B, K, N)``.
        numeric_log_std: ``(B, K, N)``, clamped to ``[LOG_STD_MIN, LOG_STD_MAX]``.
    """

    skill: torch.Tensor
    pointer: torch.Tensor
    members: torch.Tensor
    enum: torch.Tensor
    source: torch.Tensor
    numeric_mean: torch.Tensor
    numeric_log_std: torch.Tensor


@dataclass(frozen=True)
class PackedActionLayout:
    """Static sizes of the packed logits and which argument slots each skill uses.

    Attributes:
        num_skills: ``K``.
        pointer_slots / pointer_choices: ``P`` / ``Mp1``.
        list_slots / list_choices: ``L`` / ``Mp``.
        enum_slots / enum_choices: ``E`` / ``Me``.
        source_choices: ``C1``.
        numeric_slots: ``N``.
        pointer_used, list_used, enum_used, numeric_used: ``K`` rows of booleans per slot.
        list_lo, list_hi: ``K`` rows of ``L`` set-size bounds (0 and ``Mp`` for unused slots).
    """

    num_skills: int
    pointer_slots: int
    pointer_choices: int
    list_slots: int
    list_choices: int
    enum_slots: int
    enum_choices: int
    source_choices: int
    numeric_slots: int
    pointer_used: tuple[tuple[bool, ...], ...]
    list_used: tuple[tuple[bool, ...], ...]
    enum_used: tuple[tuple[bool, ...], ...]
    numeric_used: tuple[tuple[bool, ...], ...]
    list_lo: tuple[tuple[int, ...], ...]
    list_hi: tuple[tuple[int, ...], ...]

    @classmethod
    def from_action_layout(cls, layout: ActionLayout) -> PackedActionLayout:
        """Derives the packed layout from the env's :class:`ActionLayout`."""
        p, lt, e, n, mp = (
            layout.pointer_slots,
            layout.list_slots,
            layout.enum_slots,
            layout.numeric_slots,
            layout.max_pointer,
        )
        lo = tuple(
            tuple(s.list_bounds[i][0] if i < len(s.list_bounds) else 0 for i in range(lt))
            for s in layout.skills
        )
        hi = tuple(
            tuple(min(s.list_bounds[i][1], mp) if i < len(s.list_bounds) else mp for i in range(lt))
            for s in layout.skills
        )
        return cls(
            num_skills=layout.num_skills,
            pointer_slots=p,
            pointer_choices=layout.pointer_choices,
            list_slots=lt,
            list_choices=mp,
            enum_slots=e,
            enum_choices=layout.enum_max,
            source_choices=layout.num_sources + 1,
            numeric_slots=n,
            pointer_used=tuple(tuple(i < len(s.pointer_types) for i in range(p)) for s in layout.skills),
            list_used=tuple(tuple(i < len(s.list_types) for i in range(lt)) for s in layout.skills),
            enum_used=tuple(tuple(i < len(s.enum_sizes) for i in range(e)) for s in layout.skills),
            numeric_used=tuple(tuple(i < s.numeric_count for i in range(n)) for s in layout.skills),
            list_lo=lo,
            list_hi=hi,
        )

    @property
    def sizes(self) -> tuple[int, ...]:
        """Widths of the seven packed segments (skill, pointer, members, enum, source, mean, log_std)."""
        k = self.num_skills
        return (
            k,
            k * self.pointer_slots * self.pointer_choices,
            k * self.list_slots * self.list_choices,
            k * self.enum_slots * self.enum_choices,
            k * self.numeric_slots * self.source_choices,
            k * self.numeric_slots,
            k * self.numeric_slots,
        )

    @property
    def total_dim(self) -> int:
        """``D``, the width of ``action_dist_inputs``."""
        return sum(self.sizes)

    def used_masks(self, device: torch.device) -> tuple[torch.Tensor, ...]:
        """``(K, P)``, ``(K, L)``, ``(K, E)``, ``(K, N)`` float used-slot masks and ``(K, L)`` long ``lo``/``hi``.

        Cached per device, so the training loop does not copy them host → device every step.
        """
        return _used_masks(self, torch.device(device))

    def split(self, logits: torch.Tensor) -> PackedActionLogits:
        """Splits ``(B, D)`` packed logits into their parts (views, no copy except the log_std clamp)."""
        k = self.num_skills
        skill, ptr, mem, enum, src, mean, log_std = torch.split(logits, list(self.sizes), dim=-1)
        lead = logits.shape[:-1]
        return PackedActionLogits(
            skill=skill,
            pointer=ptr.reshape(*lead, k, self.pointer_slots, self.pointer_choices),
            members=mem.reshape(*lead, k, self.list_slots, self.list_choices),
            enum=enum.reshape(*lead, k, self.enum_slots, self.enum_choices),
            source=src.reshape(*lead, k, self.numeric_slots, self.source_choices),
            numeric_mean=mean.reshape(*lead, k, self.numeric_slots),
            numeric_log_std=log_std.reshape(*lead, k, self.numeric_slots).clamp(LOG_STD_MIN, LOG_STD_MAX),
        )


@functools.lru_cache(maxsize=64)
def _used_masks(layout: PackedActionLayout, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (
        torch.tensor(layout.pointer_used, dtype=torch.float32, device=device),
        torch.tensor(layout.list_used, dtype=torch.float32, device=device),
        torch.tensor(layout.enum_used, dtype=torch.float32, device=device),
        torch.tensor(layout.numeric_used, dtype=torch.float32, device=device),
        torch.tensor(layout.list_lo, dtype=torch.long, device=device),
        torch.tensor(layout.list_hi, dtype=torch.long, device=device),
    )


def _select_skill(t: torch.Tensor, skill: torch.Tensor) -> torch.Tensor:
    """``t[b, skill[b]]`` for ``t`` of shape ``(B, K, ...)`` → ``(B, ...)``."""
    idx = skill.long().view(-1, *([1] * (t.dim() - 1))).expand(-1, 1, *t.shape[2:])
    return t.gather(1, idx).squeeze(1)


def _categorical_entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = F.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def _categorical_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    logp = F.log_softmax(p_logits, dim=-1)
    logq = F.log_softmax(q_logits, dim=-1)
    return (logp.exp() * (logp - logq)).sum(-1)


def _members(
    parts: PackedActionLogits, layout: PackedActionLayout, action: dict[str, torch.Tensor]
) -> torch.Tensor:
    b = parts.skill.shape[0]
    return action["members"].reshape(b, layout.list_slots, layout.list_choices)


def skill_argument_sample(
    parts: PackedActionLogits, layout: PackedActionLayout, *, reparameterize: bool = False
) -> dict[str, torch.Tensor]:
    """Samples the skill, then the arguments of that skill. Unused slots are 0.

    Args:
        parts: Packed logits split by :meth:`PackedActionLayout.split`, batch ``B``.
        layout: Static layout (which slots each skill uses).
        reparameterize: If True the numeric sample is ``mean + std · eps`` with gradients (discrete parts
            never carry gradients).

    Returns:
        ``{"skill": (B,), "pointer": (B, P), "members": (B, L·Mp), "enum": (B, E), "source": (B, N)}`` int64
        and ``"numeric": (B, N)`` float.
    """
    p_used, l_used, e_used, n_used, lo, hi = layout.used_masks(parts.skill.device)
    cat = torch.distributions.Categorical
    skill = cat(logits=parts.skill, validate_args=False).sample()
    pointer = cat(logits=_select_skill(parts.pointer, skill), validate_args=False).sample()
    members = set_sample(_select_skill(parts.members, skill), lo[skill], hi[skill])
    enum = cat(logits=_select_skill(parts.enum, skill), validate_args=False).sample()
    source = cat(logits=_select_skill(parts.source, skill), validate_args=False).sample()
    mean = _select_skill(parts.numeric_mean, skill)
    std = _select_skill(parts.numeric_log_std, skill).exp()
    eps = torch.randn_like(mean)
    numeric = mean + std * eps if reparameterize else (mean + std * eps).detach()
    return {
        "skill": skill,
        "pointer": pointer * p_used[skill].long(),
        "members": (members * l_used[skill].long().unsqueeze(-1)).flatten(1),
        "enum": enum * e_used[skill].long(),
        "source": source * n_used[skill].long(),
        "numeric": numeric * n_used[skill].to(numeric.dtype),
    }


def skill_argument_mode(parts: PackedActionLogits, layout: PackedActionLayout) -> dict[str, torch.Tensor]:
    """The greedy action: argmax skill, then the most probable arguments of that skill (the most probable set,
    argmax pointer/enum/source, the numeric mean).

    Returns:
        Same structure as :func:`skill_argument_sample`.
    """
    p_used, l_used, e_used, n_used, lo, hi = layout.used_masks(parts.skill.device)
    skill = parts.skill.argmax(-1)
    members = set_mode(_select_skill(parts.members, skill), lo[skill], hi[skill])
    return {
        "skill": skill,
        "pointer": _select_skill(parts.pointer, skill).argmax(-1) * p_used[skill].long(),
        "members": (members * l_used[skill].long().unsqueeze(-1)).flatten(1),
        "enum": _select_skill(parts.enum, skill).argmax(-1) * e_used[skill].long(),
        "source": _select_skill(parts.source, skill).argmax(-1) * n_used[skill].long(),
        "numeric": _select_skill(parts.numeric_mean, skill) * n_used[skill].to(parts.numeric_mean.dtype),
    }


def skill_argument_logp(
    parts: PackedActionLogits, layout: PackedActionLayout, action: dict[str, torch.Tensor]
) -> torch.Tensor:
    """Log-probability of a structured action; only the slots of the chosen skill count.

    Args:
        parts: Packed logits, batch ``B``.
        layout: Static layout.
        action: as :func:`skill_argument_sample` returns; unused slots may hold anything (they are ignored).

    Returns:
        ``(B,)`` float tensor.
    """
    p_used, l_used, e_used, n_used, lo, hi = layout.used_masks(parts.skill.device)
    skill = action["skill"].long().reshape(-1)
    logp = F.log_softmax(parts.skill, dim=-1).gather(-1, skill[:, None]).squeeze(-1)

    ptr_logp = F.log_softmax(_select_skill(parts.pointer, skill), dim=-1)
    ptr = action["pointer"].long().clamp(0, layout.pointer_choices - 1)
    logp = logp + (ptr_logp.gather(-1, ptr[..., None]).squeeze(-1) * p_used[skill]).sum(-1)

    members = _members(parts, layout, action).clamp(0, 1)
    set_lp = set_logp(_select_skill(parts.members, skill), lo[skill], hi[skill], members)
    logp = logp + (set_lp * l_used[skill]).sum(-1)

    enum_logp = F.log_softmax(_select_skill(parts.enum, skill), dim=-1)
    enum = action["enum"].long().clamp(0, layout.enum_choices - 1)
    logp = logp + (enum_logp.gather(-1, enum[..., None]).squeeze(-1) * e_used[skill]).sum(-1)

    src_logp = F.log_softmax(_select_skill(parts.source, skill), dim=-1)
    src = action["source"].long().clamp(0, layout.source_choices - 1)
    src_lp = src_logp.gather(-1, src[..., None]).squeeze(-1)
    log_std = _select_skill(parts.numeric_log_std, skill)
    mean = sigma_scaled_mean(_select_skill(parts.numeric_mean, skill), log_std)
    x = action["numeric"].to(mean.dtype)
    gauss = -0.5 * ((x - mean) / log_std.exp()) ** 2 - log_std - _HALF_LOG_2PI
    free = (src == 0).to(gauss.dtype)
    return logp + ((src_lp + free * gauss) * n_used[skill]).sum(-1)


def sigma_scaled_mean(mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """``mean`` with its gradient multiplied by ``σ = exp(log_std)`` (same values; straight-through).

    The score of a Gaussian mean is ``(x − μ)/σ² = ε/σ``. After imitation σ is small and that score dwarfs the
    discrete heads', so the policy group's global-norm gradient clip spent nearly all of every RL update on the
    numeric mean, which random-walked off its target, while skill, pointer and enum heads barely moved (see
    ``benchmarks/results/quickstart.md``). Scaled by ``σ`` the score is ``ε``, on the discrete heads' scale, and
    a precise mean moves in proportion to its own spread.
    """
    return mean.detach() + (mean - mean.detach()) * log_std.detach().exp()


def _per_skill_argument_entropy(parts: PackedActionLogits, layout: PackedActionLayout) -> torch.Tensor:
    """``(B, K)``: entropy of the used argument slots of each skill."""
    p_used, l_used, e_used, n_used, lo, hi = layout.used_masks(parts.skill.device)
    h = (_categorical_entropy(parts.pointer) * p_used).sum(-1)
    h = h + (set_entropy(parts.members, lo, hi) * l_used).sum(-1)
    h = h + (_categorical_entropy(parts.enum) * e_used).sum(-1)
    p_free = F.softmax(parts.source, dim=-1)[..., 0]
    h_num = _categorical_entropy(parts.source) + p_free * (parts.numeric_log_std + 0.5 + _HALF_LOG_2PI)
    return h + (h_num * n_used).sum(-1)


def skill_argument_entropy(parts: PackedActionLogits, layout: PackedActionLayout) -> torch.Tensor:
    """Exact entropy of the joint (skill, arguments): ``H(skill) + Σ_k p(k) H(args | k)``.

    Returns:
        ``(B,)`` float tensor.
    """
    skill_logp = F.log_softmax(parts.skill, dim=-1)
    skill_p = skill_logp.exp()
    h_skill = -(skill_p * skill_logp).sum(-1)
    return h_skill + (skill_p * _per_skill_argument_entropy(parts, layout)).sum(-1)


def skill_argument_kl(
    p: PackedActionLogits, q: PackedActionLogits, layout: PackedActionLayout
) -> torch.Tensor:
    """Exact ``KL(p ‖ q)`` of the joint: ``KL(skill) + Σ_k p(k) KL(args | k)``.

    Returns:
        ``(B,)`` float tensor.
    """
    p_used, l_used, e_used, n_used, lo, hi = layout.used_masks(p.skill.device)
    skill_logp = F.log_softmax(p.skill, dim=-1)
    skill_p = skill_logp.exp()
    kl_skill = (skill_p * (skill_logp - F.log_softmax(q.skill, dim=-1))).sum(-1)

    kl_args = (_categorical_kl(p.pointer, q.pointer) * p_used).sum(-1)
    kl_args = kl_args + (set_kl(p.members, q.members, lo, hi) * l_used).sum(-1)
    kl_args = kl_args + (_categorical_kl(p.enum, q.enum) * e_used).sum(-1)
    var_p = (2.0 * p.numeric_log_std).exp()
    var_q = (2.0 * q.numeric_log_std).exp()
    kl_gauss = (
        q.numeric_log_std
        - p.numeric_log_std
        + (var_p + (p.numeric_mean - q.numeric_mean) ** 2) / (2.0 * var_q)
        - 0.5
    )
    p_free = F.softmax(p.source, dim=-1)[..., 0]
    kl_num = _categorical_kl(p.source, q.source) + p_free * kl_gauss
    kl_args = kl_args + (kl_num * n_used).sum(-1)
    return kl_skill + (skill_p * kl_args).sum(-1)
