"""Build-time augmentation: a domain's tasks rendered as varied customer messages with labelled slot spans.

Each example is one task written as a conversation: a template of each subtask's family (see
:mod:`agentic_ray.domains.rendering`) with its slots filled, the customer's identity written into the text
("I'm Li Wei, zip 361001"), an optional greeting and sign-off, the identity before or after the request, two
requests joined into one message for a composite task, a follow-up turn that refers to the earlier one, and typos
in the words around the slots. Every third template of each (family, slot set) group, every third fact template
and every third greeting, sign-off, joiner and follow-up opener are held out: ``split="heldout"`` uses only those,
``split="train"`` never does.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Literal

from agentic_ray.domains.protocol import Domain, Task
from agentic_ray.domains.rendering import Renderings, template_slots
from agentic_ray.parser.dag_template import draw_tasks

__all__ = ["Example", "Piece", "render_corpus", "render_task", "split_items"]

Split = Literal["train", "heldout"]

GREETINGS = (
    "Hi.",
    "Hello,",
    "Good morning.",
    "Hey there!",
    "Hi team,",
    "Dear support,",
    "Hello again.",
    "Good evening,",
    "Hi, hope you are well.",
)
SIGNOFFS = ("Thanks.", "Thank you!", "Cheers", "Thanks in advance.", "Regards.", "Many thanks!")
JOINERS = ("Also, ", "Another thing: ", "And one more issue. ", "Besides that, ", "Second, ", "Plus, ")
FOLLOW_UPS = (
    "Any news on my request above?",
    "Following up on my last message.",
    "Sorry, I forgot to say who I am.",
    "Did you see my message?",
    "Just checking on this.",
    "Adding to what I wrote before.",
)
HOLD_EVERY = 3
"""Every ``HOLD_EVERY``-th item (index ``HOLD_EVERY - 1``, ``2*HOLD_EVERY - 1``...) of each group is held out."""


def split_items(items: tuple[str, ...], split: Split) -> tuple[str, ...]:
    """The items of ``split``: held out are those at index ``k * HOLD_EVERY - 1``."""
    held = tuple(x for i, x in enumerate(items) if i % HOLD_EVERY == HOLD_EVERY - 1)
    return held if split == "heldout" else tuple(x for x in items if x not in held)


def _by_slots(templates: tuple[str, ...], split: Split) -> dict[frozenset[str], tuple[str, ...]]:
    groups: dict[frozenset[str], tuple[str, ...]] = {}
    for t in templates:
        k = frozenset(template_slots(t))
        groups[k] = (*groups.get(k, ()), t)
    return {k: split_items(v, split) for k, v in groups.items()}


@dataclass(frozen=True)
class Piece:
    """A labelled stretch of an example: ``slot`` set for a slot fill, ``subtask`` set for a request's words."""

    turn: int
    start: int
    end: int
    slot: str | None = None
    value: str | None = None
    subtask: int | None = None


@dataclass(frozen=True)
class Example:
    """One rendered conversation.

    Attributes:
        turns: the customer's turns; the last is the text to parse, the others its history.
        task: the task it renders (gold goals, facts, mentioned entities).
        families: the simple families, in the order the text raises them.
        slots: per subtask, the slot values (from ``Renderings.slots``).
        pieces: slot fills and request stretches, with their turn and character span.
        templates: the request template of each subtask (what a template-disjoint split groups by).
    """

    turns: tuple[str, ...]
    task: Task
    families: tuple[str, ...]
    slots: tuple[dict[str, str], ...]
    pieces: tuple[Piece, ...]
    templates: tuple[str, ...] = ()


def _typo(word: str, r: random.Random) -> str:
    if len(word) < 4 or not word.isalpha():
        return word
    i = r.randrange(1, len(word) - 1)
    kind = r.randrange(3)
    if kind == 0:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == 1:
        return word[:i] + word[i + 1 :]
    return word[:i] + word[i] + word[i:]


def _noisy(text: str, r: random.Random, typo_rate: float, lower: bool) -> str:
    words = text.split(" ")
    words = [_typo(w, r) if r.random() < typo_rate else w for w in words]
    out = " ".join(words)
    return out.lower() if lower else out


class _Builder:
    """Appends text to turns, recording the spans of slot fills and request words."""

    def __init__(self) -> None:
        self.turns: list[str] = [""]
        self.pieces: list[Piece] = []

    def new_turn(self) -> None:
        self.turns.append("")

    def _add(
        self, text: str, slot: str | None = None, value: str | None = None, subtask: int | None = None
    ) -> None:
        t = len(self.turns) - 1
        start = len(self.turns[t])
        self.turns[t] += text
        if slot is not None or subtask is not None:
            self.pieces.append(Piece(t, start, start + len(text), slot, value, subtask))

    def sentence(self, text: str) -> None:
        if self.turns[-1] and not self.turns[-1].endswith((" ", "\n")):
            self._add(" ")
        self._add(text)

    def template(
        self,
        template: str,
        fills: dict[str, tuple[str, str]],
        subtask: int | None,
        r: random.Random,
        typo_rate: float,
        lower: bool,
        prefix: str = "",
    ) -> None:
        if self.turns[-1] and not self.turns[-1].endswith((" ", "\n")):
            self._add(" ")
        t = len(self.turns) - 1
        start = len(self.turns[t])
        if prefix:
            self._add(prefix)
            if template[:1].isupper() and template[:1] != "{" and not template.startswith("I "):
                template = template[0].lower() + template[1:]
        for literal, name, _, _ in string.Formatter().parse(template):
            if literal:
                self._add(_noisy(literal, r, typo_rate, lower))
            if name:
                surface, value = fills[name]
                self._add(surface, slot=name, value=value, subtask=subtask)
        if subtask is not None:
            self.pieces.append(Piece(t, start, len(self.turns[t]), None, None, subtask))


def _fills(renderings: Renderings, slots: dict[str, str], r: random.Random) -> dict[str, tuple[str, str]]:
    out = {}
    for k, v in slots.items():
        phrases = renderings.value_phrases.get(k, {}).get(v)
        out[k] = (r.choice(phrases) if phrases else v, v)
    return out


def render_task(
    task: Task,
    renderings: Renderings,
    r: random.Random,
    split: Split,
    typo_rate: float = 0.04,
    follow_up_rate: float = 0.25,
) -> Example:
    """One task as a conversation (see the module docstring); deterministic for a seeded ``r``."""
    families = task.subtasks or (task.family,)
    slots = renderings.slots(task)
    requests = []
    for fam, s in zip(families, slots, strict=True):
        group = _by_slots(renderings.templates[fam], split).get(frozenset(s), ())
        if not group:
            raise ValueError(f"no {split} template of {fam!r} has the slots {sorted(s)}")
        requests.append((r.choice(group), _fills(renderings, s, r)))
    fact_group = _by_slots(renderings.fact_templates, split).get(frozenset(task.request.facts), ())
    if not fact_group:
        raise ValueError(f"no {split} fact template has the facts {sorted(task.request.facts)}")
    fact_t = r.choice(fact_group)
    joined = {k: v if isinstance(v, str) else " or ".join(v) for k, v in task.request.facts.items()}
    fact_fills = {k: (v, v) for k, v in joined.items()}
    lower = r.random() < 0.15
    b = _Builder()
    follow_up = r.random() < follow_up_rate
    facts_first = r.random() < 0.4
    if r.random() < 0.5:
        b.sentence(_noisy(r.choice(split_items(GREETINGS, split)), r, typo_rate, lower))

    def facts() -> None:
        b.template(fact_t, fact_fills, None, r, typo_rate, lower)

    def request_block() -> None:
        for k, (tmpl, fills) in enumerate(requests):
            prefix = r.choice(split_items(JOINERS, split)) if k else ""
            b.template(tmpl, fills, k, r, typo_rate, lower, prefix=prefix)

    if facts_first:
        facts()
        if follow_up:
            b.new_turn()
        request_block()
    else:
        request_block()
        if follow_up:
            b.new_turn()
            b.sentence(_noisy(r.choice(split_items(FOLLOW_UPS, split)), r, typo_rate, lower))
        facts()
    if r.random() < 0.4:
        b.sentence(_noisy(r.choice(split_items(SIGNOFFS, split)), r, typo_rate, lower))
    return Example(
        tuple(b.turns), task, tuple(families), tuple(slots), tuple(b.pieces), tuple(t for t, _ in requests)
    )


def render_corpus(
    domain: Domain,
    renderings: Renderings,
    per_family: int,
    split: Split,
    seed: int = 0,
    typo_rate: float = 0.04,
) -> list[Example]:
    """``per_family`` rendered tasks of each family of ``domain`` (training seeds; the held-out split draws other
    tasks than the training split, from another seed)."""
    r = random.Random(f"{domain.name}/{split}/{seed}")
    out = []
    for fam in domain.families:
        for t in draw_tasks(domain, fam, per_family, seed + (7919 if split == "heldout" else 0)):
            out.append(render_task(t, renderings, r, split, typo_rate))
    return out
