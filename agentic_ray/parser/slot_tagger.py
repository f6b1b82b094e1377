"""A token tagger for slots (BIO labels), trained on the rendered corpus: ids, facts and enum phrases alike.

Each token is classified from sparse features of itself and its neighbours (lower-cased word, character shape,
affixes, the two words either side) by a multinomial logistic regression (scikit-learn); the weights are kept as
arrays, so the shipped parser is a few hundred KB and a parse needs no scikit-learn object. One learned tagger
covers every slot of every domain: an id's format, a name after "I'm", a phrase such as "a parcel locker" are all
learned from the domain's renderings, so no pattern is written per domain.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

__all__ = ["SlotTagger", "TaggedSpan", "bio_labels", "tokenize"]

TOKEN = re.compile(r"\w+(?:[.@+'-]\w+)*|[^\w\s]")
OUTSIDE = "O"
_CONTEXT = ("w-", "w+", "sh-", "sh+", "bi-", "bi+")
"""Prefixes of the features that describe a token's neighbours. Training sees every token twice, once with them
and once without, so that the token's own features (its word, its id format, the lexicon) carry weight of their
own: without this, on the help-desk held-out renderings a ticket id or a priority in an unseen sentence was
missed (slot F1 0.95); with it, see the benchmark."""


def tokenize(text: str) -> list[tuple[int, int, str]]:
    """``[(start, end, token)]``: words (with inner ``.@+'-``, so an email is one token) and punctuation."""
    return [(m.start(), m.end(), m.group()) for m in TOKEN.finditer(text)]


def _shape(tok: str) -> str:
    return "".join("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in tok)


def _short(shape: str) -> str:
    return re.sub(r"(.)\1+", r"\1", shape)


def _features(toks: Sequence[str], i: int) -> list[str]:
    w = toks[i]
    low = w.lower()
    sh = _shape(w)
    f = [
        "bias",
        f"w={low}",
        f"sh={_short(sh)}",
        f"shl={sh if len(sh) <= 12 else sh[:12]}",
        f"len={min(len(w), 12)}",
        f"p3={low[:3]}",
        f"s3={low[-3:]}",
        f"title={w.istitle()}",
        f"at={'@' in w}",
        f"fmt={re.sub(r'[0-9]', 'd', w)[:12] if any(ch.isdigit() for ch in w) else '-'}",
    ]
    for d in (-2, -1, 1, 2):
        j = i + d
        if 0 <= j < len(toks):
            f.append(f"w{d:+d}={toks[j].lower()}")
            f.append(f"sh{d:+d}={_short(_shape(toks[j]))}")
        else:
            f.append(f"w{d:+d}=<edge>")
    if i > 0:
        f.append(f"bi-1={toks[i - 1].lower()}|{low}")
    if i + 1 < len(toks):
        f.append(f"bi+1={low}|{toks[i + 1].lower()}")
    return f


def _gazetteer(words: Sequence[str], lexicon: dict[str, list[list[str]]]) -> list[list[str]]:
    """Per token, ``gaz=<slot>:B|I`` for each lexicon phrase of a slot that the token starts or continues."""
    low = [w.lower() for w in words]
    out: list[list[str]] = [[] for _ in words]
    for slot, phrases in lexicon.items():
        for ph in phrases:
            n = len(ph)
            for i in range(len(low) - n + 1):
                if low[i : i + n] == ph:
                    out[i].append(f"gaz={slot}:B")
                    for j in range(i + 1, i + n):
                        out[j].append(f"gaz={slot}:I")
    return out


def bio_labels(tokens: Sequence[tuple[int, int, str]], spans: Sequence[tuple[int, int, str]]) -> list[str]:
    """BIO labels of ``tokens`` for slot ``spans`` ``[(start, end, slot)]`` (a token inside a span gets its slot)."""
    out = []
    for s, e, _ in tokens:
        lab = OUTSIDE
        for ps, pe, slot in spans:
            if s >= ps and e <= pe:
                lab = f"{'B' if s == ps or not any(ts >= ps and te <= s for ts, te, _ in tokens) else 'I'}-{slot}"
                break
        out.append(lab)
    return out


@dataclass(frozen=True)
class TaggedSpan:
    """A slot span found in a text: ``text[start:end]`` with the mean token probability."""

    slot: str
    start: int
    end: int
    text: str
    confidence: float


class SlotTagger:
    """BIO slot tagging by multinomial logistic regression over token features.

    Besides the words around a token, a feature says when the token is part of a phrase of an enum slot's lexicon
    (the domain's ``value_phrases``): without it, a category word in a held-out context ("the home piece is
    cracked") was missed; the lexicon is the domain's declared vocabulary, not a pattern per domain.

    Attributes:
        lexicon: enum slot -> phrases (gazetteer features).
        vocab: feature -> column.
        labels: the tag labels (``O``, ``B-<slot>``, ``I-<slot>``).
        coef: ``(len(labels), len(vocab))`` float32.
        intercept: ``(len(labels),)`` float32.
    """

    def __init__(
        self,
        vocab: dict[str, int],
        labels: list[str],
        coef: np.ndarray,
        intercept: np.ndarray,
        lexicon: dict[str, list[str]] | None = None,
    ) -> None:
        self.lexicon = lexicon or {}
        self._lex = {k: [[t for _, _, t in tokenize(p.lower())] for p in v] for k, v in self.lexicon.items()}
        self.vocab = vocab
        self.labels = labels
        self.coef = coef.astype(np.float32)
        self.intercept = intercept.astype(np.float32)

    @classmethod
    def fit(
        cls,
        texts: Sequence[str],
        spans: Sequence[Sequence[tuple[int, int, str]]],
        lexicon: dict[str, list[str]],
        c: float = 4.0,
        seed: int = 0,
    ) -> SlotTagger:
        """Train on texts with their slot spans ``[(start, end, slot)]``."""
        from sklearn.linear_model import LogisticRegression

        probe = cls({}, [], np.zeros((0, 0)), np.zeros(0), lexicon)

        rows: list[list[str]] = []
        y: list[str] = []
        for text, sp in zip(texts, spans, strict=True):
            toks = tokenize(text)
            words = [t for _, _, t in toks]
            full = probe._rows(words)
            labs = bio_labels(toks, sp)
            rows += full + [[f for f in r if not f.startswith(_CONTEXT)] for r in full]
            y += labs + labs
        vocab: dict[str, int] = {}
        for r in rows:
            for f in r:
                vocab.setdefault(f, len(vocab))
        x = cls._matrix(rows, vocab)
        labels = sorted(set(y))
        clf = LogisticRegression(C=c, max_iter=500, random_state=seed)
        clf.fit(x, np.array([labels.index(v) for v in y]))
        return cls(vocab, labels, clf.coef_, clf.intercept_, lexicon)

    def _rows(self, words: Sequence[str]) -> list[list[str]]:
        """Feature names of each token (its own, its neighbours', the lexicon's)."""
        gaz = _gazetteer(words, self._lex)
        return [_features(words, i) + gaz[i] for i in range(len(words))]

    @staticmethod
    def _matrix(rows: Sequence[Sequence[str]], vocab: dict[str, int]) -> sparse.csr_matrix:
        idx = [[vocab[f] for f in r if f in vocab] for r in rows]
        indptr = np.cumsum([0] + [len(i) for i in idx])
        cols = np.fromiter((c for i in idx for c in i), dtype=np.int64, count=int(indptr[-1]))
        data = np.ones(len(cols), dtype=np.float32)
        return sparse.csr_matrix((data, cols, indptr), shape=(len(rows), len(vocab)))

    def token_probs(self, words: Sequence[str]) -> np.ndarray:
        """``(len(words), len(labels))`` tag probabilities."""
        if not words:
            return np.zeros((0, len(self.labels)), dtype=np.float32)
        x = self._matrix(self._rows(words), self.vocab)
        z = x @ self.coef.T + self.intercept
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return np.asarray(p / p.sum(axis=1, keepdims=True))

    def tag(self, text: str) -> list[TaggedSpan]:
        """The slot spans of ``text`` (an ``I-`` tag after another slot's tag starts a new span)."""
        toks = tokenize(text)
        probs = self.token_probs([t for _, _, t in toks])
        out: list[TaggedSpan] = []
        cur: tuple[str, int, int, list[float]] | None = None
        for (s, e, _), p in zip(toks, probs, strict=True):
            k = int(np.argmax(p))
            lab = self.labels[k]
            if lab == OUTSIDE:
                if cur:
                    out.append(
                        TaggedSpan(cur[0], cur[1], cur[2], text[cur[1] : cur[2]], float(np.mean(cur[3])))
                    )
                cur = None
                continue
            kind, slot = lab.split("-", 1)
            if cur and kind == "I" and cur[0] == slot:
                cur = (slot, cur[1], e, [*cur[3], float(p[k])])
                continue
            if cur:
                out.append(TaggedSpan(cur[0], cur[1], cur[2], text[cur[1] : cur[2]], float(np.mean(cur[3]))))
            cur = (slot, s, e, [float(p[k])])
        if cur:
            out.append(TaggedSpan(cur[0], cur[1], cur[2], text[cur[1] : cur[2]], float(np.mean(cur[3]))))
        return out
