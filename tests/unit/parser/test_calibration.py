"""The parser's ``min_confidence`` is learnt on template-disjoint folds: each calibration parse meets a request
template that its fold's classifier never saw, and the threshold is where the fitted P(family right) reaches the
configured accuracy."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import pytest

from agentic_ray.domains import get_domain
from agentic_ray.parser.corpus import render_corpus
from agentic_ray.parser.train import (
    ParserTrainConfig,
    calibrate_min_confidence,
    domain_renderings,
    template_folds,
)


def test_template_folds_never_share_a_template_between_fit_and_calibration() -> None:
    d = get_domain("ecommerce")
    rend = domain_renderings(d)
    corpus = render_corpus(d, rend, 12, "train", seed=0)
    folds = template_folds(corpus, rend, 3)
    assert all(folds)  # every example falls in some fold
    for k in range(3):
        held = [ex for ex, fs in zip(corpus, folds, strict=True) if k in fs]
        fit = {
            (f, t)
            for ex, fs in zip(corpus, folds, strict=True)
            if k not in fs
            for f, t in zip(ex.families, ex.templates, strict=True)
        }
        assert held and fit
        # every calibration example has a request template its fold's classifier never saw
        assert all(any(ft not in fit for ft in zip(ex.families, ex.templates, strict=True)) for ex in held)


@dataclasses.dataclass
class _Parse:
    families: tuple[str, ...]
    confidence: float


class _FakeParser:
    """Parses with a preset confidence per example; right with probability sigmoid(3·logit(confidence) + 1.5)."""

    def __init__(self, corpus: list[Any]) -> None:
        rng = np.random.default_rng(0)
        self.classifier = type("C", (), {"families": ["a", "b"]})()
        self._by_text: dict[str, _Parse] = {}
        for ex in corpus:
            c = float(rng.uniform(0.05, 0.95))
            right = rng.random() < 1 / (1 + np.exp(-3 * np.log(c / (1 - c)) - 1.5))
            gold = ex.task.subtasks or (ex.task.family,)
            self._by_text[ex.turns[-1]] = _Parse(tuple(gold) if right else ("wrong",), c)

    def parse(self, text: str, history: Any) -> _Parse:
        return self._by_text[text]


def _threshold(target: float) -> float:
    """The confidence at which sigmoid(3·logit(c) + 1.5) = target."""
    z = (np.log(target / (1 - target)) - 1.5) / 3
    return float(1 / (1 + np.exp(-z)))


@pytest.mark.parametrize("target, expected", [(0.5, _threshold(0.5)), (0.8, _threshold(0.8))])
def test_threshold_is_where_the_fitted_accuracy_reaches_the_target(monkeypatch, target, expected) -> None:
    d = get_domain("ecommerce")
    rend = domain_renderings(d)
    corpus = render_corpus(d, rend, 150, "train", seed=0)
    monkeypatch.setattr(
        "agentic_ray.parser.train.FamilyClassifier.fit", lambda *a, **k: None
    )  # the fake parser ignores its classifier
    parser = _FakeParser(corpus)
    x = np.zeros((len(corpus), 2), dtype=np.float32)
    cfg = ParserTrainConfig(act_min_accuracy=target)
    threshold, measured = calibrate_min_confidence(copy.copy(parser), corpus, x, rend, cfg)  # type: ignore[arg-type]
    assert measured["parses"] >= len(corpus)
    assert threshold == pytest.approx(expected, abs=0.05)


def test_nothing_to_fit_keeps_the_configured_threshold(monkeypatch) -> None:
    d = get_domain("helpdesk")
    rend = domain_renderings(d)
    corpus = render_corpus(d, rend, 10, "train", seed=0)
    monkeypatch.setattr("agentic_ray.parser.train.FamilyClassifier.fit", lambda *a, **k: None)
    parser = _FakeParser(corpus)
    for p in parser._by_text.values():  # every parse right
        p.families = ("x",)
    parser.parse = lambda text, history: _Parse(  # type: ignore[method-assign]
        next(ex.task.subtasks or (ex.task.family,) for ex in corpus if ex.turns[-1] == text), 0.9
    )
    threshold, measured = calibrate_min_confidence(
        parser,  # type: ignore[arg-type]
        corpus,
        np.zeros((len(corpus), 2), dtype=np.float32),
        rend,
        ParserTrainConfig(),
    )
    assert threshold is None and measured["family_acc"] == 1.0


def test_the_shipped_parsers_carry_their_calibration() -> None:
    from agentic_ray.parser.goal_parser import load_parser

    for name in ("ecommerce", "helpdesk"):
        p = load_parser(name)
        cal = p.info["calibration"]
        assert cal["parses"] > 0 and p.min_confidence == cal["min_confidence"]
