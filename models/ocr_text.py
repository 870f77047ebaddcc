"""From the recognition network's output to fields: CTC decoding, the name and footer parsers, the vote.

What a line of glyph probabilities means for a card: greedy CTC decoding with per-glyph confidence, the
CTC score of given strings (how the scanner checks a read against the footers of candidate reprints), the
name without its HP, the set code and collector number, each with its confidence, and the vote across a
line's offsets. Plain text rules over NumPy arrays, no torch; `models.ocr` runs the network that feeds them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from rapidfuzz.distance import Levenshtein

# Below these a field is reported unreadable rather than guessed. Set on training-split faces (clean and
# damaged): at 0.6 a number is wrong 9% of the time instead of 13% at 0.5, for 1.3 points fewer exact reads.
MIN_CONFIDENCE = 0.6
NAME_MIN_CONFIDENCE = 0.5  # names are matched fuzzily downstream, so a near miss still helps
_HP = re.compile(r"(?:\s*H?P\s?|\s+)([1-9]\d?0)$")  # "HP 120", or its "P 120" / "120" when "H" is missed


def ctc_greedy(probs: np.ndarray, vocab: str) -> list[tuple[str, list[float]]]:
    """Best-path decode keeping each glyph's probability, so fields get their own confidence.

    `probs` (N, T, C; blank last): a NumPy array, or anything `np.asarray` takes (a CPU tensor)."""
    probs = np.asarray(probs)
    idx, best = probs.argmax(axis=-1), probs.max(axis=-1)
    blank = len(vocab)
    out: list[tuple[str, list[float]]] = []
    for row_idx, row_p in zip(idx.tolist(), best.tolist(), strict=True):
        chars: list[str] = []
        confs: list[float] = []
        prev = blank
        for k, p in zip(row_idx, row_p, strict=True):
            if k != blank and k == prev:
                confs[-1] = max(confs[-1], p)
            elif k != blank:
                chars.append(vocab[k])
                confs.append(p)
            prev = k
        out.append(("".join(chars), confs))
    return out


def ctc_scores(log_probs: np.ndarray, texts: Sequence[str], vocab: str) -> np.ndarray:
    """log P(text | line) under CTC for every line (log_probs: N, T, C; blank last) and every text: (N, K).

    Scoring the few footers a scan's candidates print, rather than trusting the best path, is what tells
    reprints apart when one glyph is unsure: the glyphs the candidates share cancel out, the ones that
    differ decide. A text the vocabulary cannot spell, or too long for the line, scores -inf.

    The CTC forward algorithm (Graves et al. 2006) in float64 over every line and text at once, scaled at
    each step (probabilities, not logs: products instead of `logaddexp`, ~10x cheaper): what
    `torch.nn.functional.ctc_loss` computes (negated; a test holds the two together) without torch, for a
    reader whose network runs in ONNX Runtime.
    """
    lines = np.exp(np.asarray(log_probs, dtype=np.float64))
    n, steps, _ = lines.shape
    index = {ch: i for i, ch in enumerate(vocab)}
    blank = len(vocab)
    out = np.full((n, len(texts)), -np.inf)
    keep = [k for k, text in enumerate(texts) if text and all(ch in index for ch in text)]
    if not keep or n == 0:
        return out
    # Each text with a blank before, between and after its glyphs: the states a path moves through,
    # padded to the longest with states no path reaches (probability 0).
    lengths = np.array([2 * len(texts[k]) + 1 for k in keep])
    states = np.full((len(keep), lengths.max()), blank)
    for row, k in enumerate(keep):
        states[row, 1 : lengths[row] : 2] = [index[ch] for ch in texts[k]]
    reachable = np.arange(states.shape[1]) < lengths[:, None]  # (K, S)
    # A path may skip the blank between two glyphs only where they differ.
    skip = np.zeros(states.shape, bool)
    skip[:, 3::2] = states[:, 3::2] != states[:, 1:-2:2]
    emit = lines[:, :, states] * reachable  # (N, T, K, S)
    alpha = np.zeros((n, len(keep), states.shape[1]))
    alpha[..., :2] = emit[:, 0, :, :2]
    log_scale = np.zeros((n, len(keep)))
    with np.errstate(divide="ignore"):
        for t in range(steps):
            if t:
                moved = alpha.copy()
                moved[..., 1:] += alpha[..., :-1]
                moved[..., 2:] += np.where(skip[:, 2:], alpha[..., :-2], 0.0)
                alpha = moved * emit[:, t]
            total = alpha.sum(axis=-1)
            log_scale += np.log(total)
            alpha /= np.where(total > 0, total, 1.0)[..., None]
        rows = np.arange(len(keep))
        last = alpha[:, rows, lengths - 1] + alpha[:, rows, lengths - 2]
        out[:, keep] = log_scale + np.log(last)
    return out


def span(text: str, confs: list[float], start: int, end: int, strict: bool = True) -> tuple[str, float]:
    """A stripped slice of the read and its confidence: weakest glyph (`strict`), else geometric mean."""
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    piece = piece.strip()
    if not piece:
        return "", 0.0
    probs = confs[start + lead : start + lead + len(piece)]
    return piece, min(probs) if strict else geomean(probs)


def geomean(probs: list[float]) -> float:
    return math.exp(sum(math.log(max(p, 1e-9)) for p in probs) / len(probs)) if probs else 0.0


def parse_name(text: str, confs: list[float]) -> tuple[str | None, float]:
    """The name line minus a trailing `HP 120` (the HP is printed on the same line).

    A name's confidence is its glyphs' geometric mean: names are matched fuzzily downstream, so one unsure
    glyph in a long name should not throw the whole name away (numbers and codes use the weakest glyph).
    """
    m = _HP.search(text)
    name, conf = span(text, confs, 0, m.start() if m else len(text), strict=False)
    return (name, conf) if name and conf >= NAME_MIN_CONFIDENCE else (None, conf)


def parse_footer(text: str, confs: list[float]) -> tuple[tuple[str | None, float], tuple[str | None, float]]:
    """`CODE 025/198` or `025/198` (symbol cards) -> ((code, conf), (number incl. /total, conf))."""
    tokens = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    if not tokens:
        return (None, 0.0), (None, 0.0)
    number = span(text, confs, *tokens[-1])
    # a lone number means a symbol, not a code box: as sure of that as of the line
    code = span(text, confs, *tokens[0]) if len(tokens) > 1 else ("", number[1])
    if len(tokens) > 2:  # more than code + number is not a footer we know: trust neither much
        code, number = (
            (code[0], min(code[1], MIN_CONFIDENCE / 2)),
            (number[0], min(number[1], MIN_CONFIDENCE / 2)),
        )
    code_val = code[0] if code[0] and code[1] >= MIN_CONFIDENCE else None
    num_val = number[0] if number[0] and number[1] >= MIN_CONFIDENCE else None
    return (code_val, code[1]), (num_val, number[1])


def line_score(read: tuple[str, list[float]]) -> float:
    """A read's geometric-mean glyph confidence; an empty read (no line centred in the crop) loses to any."""
    text, confs = read
    return geomean(confs) if text.strip() and confs else -1.0


def vote(reads: Sequence[tuple[str, list[float]]]) -> tuple[str, list[float]]:
    """The offsets' consensus: the read the others, weighted by their confidence, are most similar to.

    Each non-empty read scores the sum over all reads (itself included) of that read's confidence times its
    normalised Levenshtein similarity to the candidate, so two offsets agreeing on a string outvote a lone,
    more confident outlier, and near-misses still lend support. Ties go to the more confident read; a line
    no offset read stays empty.
    """
    texts = [r for r in reads if r[0].strip() and r[1]]
    if not texts:
        return max(reads, key=line_score) if reads else ("", [])
    weights = [line_score(r) for r in texts]

    def support(read: tuple[str, list[float]]) -> tuple[float, float]:
        agree = sum(
            w * Levenshtein.normalized_similarity(read[0], o[0]) for o, w in zip(texts, weights, strict=True)
        )
        return agree, line_score(read)

    return max(texts, key=support)
