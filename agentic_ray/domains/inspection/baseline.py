"""The fixed-threshold rule policy: what an inspection station does without learning (issue 30's baseline).

It runs ``detect`` at one fixed parameter setting (the contract's defaults unless given others), then ranks and
records from what the tools revealed. It reads only what the agent could know: the request (its line and the
parts it names), the goals as the observation shows them (their skill, whether they are ready, the enum value a
goal constrains, e.g. the finding to record or the ``k`` of a ranking) and the revealed part fields. It never
reads a goal's hidden arguments or the parts' specs (the expert does).

List the line when the request names no part; then per ready goal (most urgent first): detect (or read) the next part not yet inspected (or not read
cleanly: a read whose check character fails is read again); rank every inspected part with the goal's ``k``;
record a part the request names with what its inspection found (``crack`` if a crack was reported, else
``scratch`` if a scratch was, else ``clean``), or else the parts the revealed fields select for the finding the
goal (and the request) states (``crack``: the ranking's top k if one was made, else every part with a reported
crack; ``serial_mismatch``: a clean read that does not match the manifest); hand an unusable frame to a person.

:class:`FamilyParamsPolicy` is the same rule policy with one parameter setting per task family (what the request
says the task is), the best a policy can do that adapts ``detect`` to the request but not to the part.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.inspection.detector import DEFAULT_PARAMS
from agentic_ray.domains.protocol import EpisodeView
from agentic_ray.skills.contracts import EnumParam


class FixedThresholdPolicy:
    """The rule policy (see the module docstring).

    Args:
        detect_params: ``detect``'s parameters on every call (default: the contract's defaults).
    """

    def __init__(self, detect_params: dict[str, Any] | None = None) -> None:
        self.detect_params = dict(DEFAULT_PARAMS if detect_params is None else detect_params)

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        """The next call as ``(skill, params)``."""
        task, k = view.task, view.knowledge
        parts = k.ids("part")
        fields = {p: k.fields("part", p) for p in parts}
        ready = sorted(
            (i for i in range(len(task.goals)) if view.ready[i]),
            key=lambda j: (-task.goals[j].priority, j),
        )
        if not parts and view.allowed(
            "line.list_parts"
        ):  # the request names no part: see what is on the line
            return "line.list_parts", {"line": task.request.facts.get("line", "")}
        for i in ready:
            skill = task.goals[i].skill
            step: tuple[str, dict[str, Any]] | None = None
            if skill == "detect":
                todo = [p for p in parts if "image_ok" not in fields[p]]
                step = (skill, {"part_id": todo[0], **self.detect_params}) if todo else None
            elif skill == "ocr_extract":
                todo = [p for p in parts if fields[p].get("checksum_ok") is not True]
                step = (skill, {"part_id": todo[0]}) if todo else None
            elif skill == "rank_topk":
                inspected = [p for p in parts if "n_cracks" in fields[p]]
                step = skill, {"part_ids": inspected, "k": self._constraint(view, i)}
            elif skill == "db_update":
                named = [p for p in task.goals[i].args.get("part_ids", []) if ("part", p) in k.mentioned]
                if named:  # a record of parts the request names: what the inspection found
                    step = skill, {"part_ids": named, "finding": self._finding(fields.get(named[0], {}))}
                else:
                    finding = self._constraint(view, i)
                    chosen = self._select(finding, fields)
                    step = (skill, {"part_ids": chosen, "finding": finding}) if chosen else None
            elif skill == "inspector.handoff":
                bad = [p for p in parts if fields[p].get("image_ok") is False]
                step = skill, ({"part_id": bad[0]} if bad else {}) | {"reason": "unreadable_image"}
            if step is not None and view.allowed(step[0]):
                return step
        return "inspector.handoff", {"reason": "complex"}

    @staticmethod
    def _constraint(view: EpisodeView, i: int) -> str:
        """The value a goal requires of its skill's first enum argument (what its goal node shows), else the
        argument's first choice."""
        g = view.task.goals[i]
        name, p = next((n, p) for n, p in view.contracts[g.skill].input.items() if isinstance(p, EnumParam))
        v = g.args.get(name)
        return str(v) if v in p.choices else p.choices[0]

    @staticmethod
    def _finding(f: dict[str, Any]) -> str:
        if f.get("n_cracks", 0) > 0:
            return "crack"
        return "scratch" if f.get("n_scratches", 0) > 0 else "clean"

    @staticmethod
    def _select(finding: str, fields: dict[str, dict[str, Any]]) -> list[str]:
        if finding == "crack":
            top = [p for p, f in fields.items() if f.get("in_top_k") is True]
            return top or [p for p, f in fields.items() if f.get("n_cracks", 0) > 0]
        return [
            p for p, f in fields.items() if f.get("checksum_ok") is True and f.get("manifest_match") is False
        ]


class FamilyParamsPolicy(FixedThresholdPolicy):
    """The rule policy with ``detect``'s parameters chosen by the task's family (the request's kind of task).

    Args:
        by_family: family -> ``detect``'s parameters (a family not listed: the contract's defaults).
    """

    def __init__(self, by_family: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self.by_family = {f: dict(p) for f, p in by_family.items()}

    def plan(self, view: EpisodeView) -> tuple[str, dict[str, Any]]:
        """The next call as ``(skill, params)``, with the family's ``detect`` parameters."""
        self.detect_params = self.by_family.get(view.task.family, dict(DEFAULT_PARAMS))
        return super().plan(view)
