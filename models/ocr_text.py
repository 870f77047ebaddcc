"""From the recognition network's output to fields: CTC decoding, the name and footer parsers, the vote.

What a line of glyph probabilities means for a card: greedy CTC decoding with per-glyph confidence, the
CTC score of given strings (how the scanner checks a read against the footers of candidate reprints), the
name without its HP, the set code and collector number, each with its confidence, and the vote across a
line's offsets. Plain text rules over torch tensors; `models.ocr` runs the network that feeds them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch
from rapidfuzz.distance import Levenshtein

# Below these a field is reported unreadable rather than guessed. Set on training-split faces (clean and
# damaged): at 0.6 a number is wrong 9% of the time instead of 13% at 0.5, for 1.3 points fewer exact reads.
MIN_CONFIDENCE = 0.6
NAME_MIN_CONFIDENCE = 0.5  # names are matched fuzzily downstream, so a near miss still helps
_HP = re.compile(r"(?:\s*H?P\s?|\s+)([1-9]\d?0)$")  # "HP 120", or its "P 120" / "120" when "H" is missed


def ctc_greedy(probs: torch.Tensor, vocab: str) -> list[tuple[str, list[float]]]:
    """Best-path decode keeping each glyph's probability, so fields get their own confidence."""
    best, idx = probs.max(dim=-1)
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


def ctc_scores(log_probs: torch.Tensor, texts: Sequence[str], vocab: str) -> torch.Tensor:
    """log P(text | line) under CTC for every line (log_probs: N, T, C; blank last) and every text: (N, K).

    Scoring the few footers a scan's candidates print, rather than trusting the best path, is what tells
    reprints apart when one glyph is unsure: the glyphs the candidates share cancel out, the ones that
    differ decide. A text the vocabulary cannot spell, or too long for the line, scores -inf.
    """
    n, steps, _ = log_probs.shape
    index = {ch: i for i, ch in enumerate(vocab)}
    spellable = [bool(t) and all(ch in index for ch in t) for t in texts]
    out = torch.full((n, len(texts)), -math.inf)
    keep = [k for k, ok in enumerate(spellable) if ok]
    if not keep or n == 0:
        return out
    targets = [torch.tensor([index[ch] for ch in texts[k]]) for k in keep]
    lengths = torch.tensor([len(t) for t in targets]).repeat(n)
    flat = torch.cat(targets).repeat(n)
    # every (line, text) pair is one CTC sequence: the line's log-probs repeated once per text
    pairs = log_probs.float().repeat_interleave(len(keep), dim=0).transpose(0, 1)
    loss = torch.nn.functional.ctc_loss(
        pairs,
        flat,
        torch.full((n * len(keep),), steps, dtype=torch.long),
        lengths,
        blank=len(vocab),
        reduction="none",
        zero_infinity=False,
    )
    out[:, keep] = -loss.view(n, len(keep))
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
