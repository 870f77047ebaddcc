"""Which names can still score `MIN_SCORE` against a query: a sound, cheap pre-filter for rapidfuzz's WRatio.

Searching every language multiplies the distinct names of the card index by about 3.6 (4,141 English
names, 14,985 in the seven languages), and WRatio costs about 1 µs a name. This module drops, before
WRatio runs, the names that provably cannot reach the cut-off, so the results are exactly the same.

The bound: with no word in common, every part of WRatio is an Indel similarity `2·LCS / (|a| + |b|)`
between a string made of the query's characters and one made of the name's (the strings themselves,
their sorted words, their sorted distinct words, or a window of one of them), and an LCS is at most
the number of characters the two share (`m`, counted with multiplicity, the space included). So:
- lengths within 1.5×: WRatio ≤ max(2m / (l1 + l2), 0.95 · 2m / (d1 + d2)) (ratio; token sort and set,
  `d` the length of the sorted distinct words joined);
- otherwise (a partial match, scaled by 0.9, or 0.6 beyond 8×): WRatio ≤ max(2m / (l1 + l2),
  s · 2m / (min(l1, l2) + m), 0.95 · s · 2m / (min(d1, d2) + m)): a window of the longer string as short as
  the LCS is the best a partial alignment can do (rapidfuzz also aligns windows hanging off either end).
A name sharing a word with the query can score 100 on the token parts (WRatio's partial token ratio
returns 100 for any common word), so those names always stay. Folded text (`search.fold`) holds only
`[0-9a-z ]`; a query with anything else skips the filter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 "
_SLOT = {ch: i for i, ch in enumerate(ALPHABET)}
# Below this many names the filter costs more than the WRatio it saves.
MIN_NAMES = 2000
# Float slack: a bound a hair under the cut-off still keeps its name.
_SLACK = 1e-6


def _distinct_words_length(text: str) -> int:
    return len(" ".join(sorted(set(text.split()))))


class NameBound:
    """Character counts, lengths and words of folded names, for `candidates`."""

    def __init__(self, names: Sequence[str]) -> None:
        self.size = len(names)
        self._counts = np.zeros((len(names), len(ALPHABET)), dtype=np.uint8)
        self._usable = True
        for row, name in enumerate(names):
            for ch in name:
                slot = _SLOT.get(ch)
                if slot is None:
                    self._usable = False
                    return
                self._counts[row, slot] = min(255, int(self._counts[row, slot]) + 1)
        self._lengths = np.array([len(name) for name in names], dtype=np.float64)
        self._distinct = np.array([_distinct_words_length(name) for name in names], dtype=np.float64)
        by_word: dict[str, list[int]] = {}
        for row, name in enumerate(names):
            for word in set(name.split()):
                by_word.setdefault(word, []).append(row)
        self._by_word = {word: np.array(rows, dtype=np.intp) for word, rows in by_word.items()}

    def candidates(self, query: str, cutoff: float) -> np.ndarray | None:
        """Rows of the names whose WRatio against folded `query` may reach `cutoff` (0..1), ascending;
        None when every name must be scored (a small index, an unusual character)."""
        if not self._usable or self.size < MIN_NAMES or not query or len(query) > 255:
            return None
        wanted = np.zeros(len(ALPHABET), dtype=np.uint8)
        for ch in query:
            slot = _SLOT.get(ch)
            if slot is None:
                return None
            wanted[slot] += 1
        shared = np.minimum(self._counts, wanted).sum(axis=1, dtype=np.float64)
        length, distinct = float(len(query)), float(_distinct_words_length(query))
        whole = 2 * shared / (length + self._lengths)
        shorter = np.minimum(self._lengths, length)
        spread = np.maximum(self._lengths, length) / np.maximum(shorter, 1.0)
        close = np.maximum(whole, 0.95 * 2 * shared / np.maximum(distinct + self._distinct, 1.0))
        scale = np.where(spread <= 8.0, 0.9, 0.6)
        shorter_distinct = np.minimum(self._distinct, distinct)
        partial = np.maximum(
            whole,
            np.maximum(
                scale * 2 * shared / np.maximum(shorter + shared, 1.0),
                0.95 * scale * 2 * shared / np.maximum(shorter_distinct + shared, 1.0),
            ),
        )
        keep = np.where(spread < 1.5, close, partial) >= cutoff - _SLACK
        for word in set(query.split()):
            shares = self._by_word.get(word)
            if shares is not None:
                keep[shares] = True
        return np.flatnonzero(keep)
