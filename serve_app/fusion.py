"""Fusing what the photo looks like with what its print says.

Spec rules, in order: a legible print restricts the candidates to cards that agree with it; similarity
ranks the rest; anything read that matches no catalog card is discarded; an unreadable print leaves the
picture to decide alone. Reprints share their artwork, so the picture cannot tell them apart: the
printed number and set code do. The answer is one confident match, up to five in a close race, or
`unidentified` — never a guessed list.

With nothing legible (#43, spec rules 2 and 4): `print_unreadable` only when nothing looked close, that is
the best card scores under what photos with no card in them reach (`Thresholds.close_similarity`);
otherwise the best artwork's reprints race (up to five, best first). A lone answer needs the print (or the
footer's odds) to back it, or a unique artwork the picture is sure of (`accept` with `margin`): a picture
score like 0.86 with nothing read is a race, never one card.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from core.cardtext import footer_line, normalize_number
from core.scan_contract import (
    PRINT_MATCHES_NOTHING,
    PRINT_UNREADABLE,
    ScanDecision,
    Tier,
    Unidentified,
    UnidentifiedReason,
)

MAX_MATCHES = 5
# Index search hits for one face: (card id, cosine similarity), best first.
Hits = list[tuple[str, float]]


@dataclass(frozen=True)
class CardPrint:
    """What is printed on one catalog card, as the scanner compares it."""

    id: str
    name: str
    number: str | None
    set_code: str | None
    printed_total: str | None
    artwork: str

    @property
    def number_key(self) -> str | None:
        return number_key(self.number)

    @property
    def footer(self) -> str:
        """The footer line as printed: 'SSP 025/191', or '025/102' under a set symbol."""
        return footer_line(self.set_code, self.number, self.printed_total)


def number_key(number: str | None) -> str | None:
    """'025' -> '25', 'TG05' -> 'TG5', '025/198' -> '25'; case-folded for matching."""
    folded = normalize_number(number) if number else None
    return folded.upper() if folded else None


@dataclass(frozen=True)
class Read:
    """The OCR's reading of a face; fields below their confidence floor count as unread."""

    name: str | None = None
    name_confidence: float = 0.0
    number: str | None = None
    number_confidence: float = 0.0
    printed_total: str | None = None
    set_code: str | None = None
    set_code_confidence: float = 0.0
    footer_scores: Mapping[str, float] = field(default_factory=dict)  # footer line -> log P(line | crop)


@dataclass(frozen=True)
class Thresholds:
    """Cosine cut-offs from the embedder's full-catalog evaluation (models/weights/embedder.json): the
    right artwork scores >= 0.892 in 95% of held-out photos, the best wrong one <= 0.876 in 95%. The
    field floor was chosen on validation photos (benchmarks/fusion_sweep.py): 0.7 halved the confident
    wrong answers of 0.5 and 0.8 and read the most reprints right; the cosine cut-offs moved nothing."""

    field_confidence: float = 0.7  # a field read below this is treated as unread
    min_similarity: float = 0.80  # with a legible print: below this no card it names "looks close"
    accept: float = 0.95  # picture alone: accept one card at or above this...
    margin: float = 0.03  # ...when the next different artwork is at least this far below
    accept_with_print: float = 0.82  # a card the print singles out needs only this much similarity
    race_window: float = 0.05  # a close race holds candidates within this of the best
    # With a legible print, a card with no other within the race window is answered alone at this
    # similarity; below it the photo is unidentified. Chosen on validation photos
    # (benchmarks/fusion_sweep.py): with the first embedder lone cards were wrong at 0.81 and 0.86 (0.89
    # then). With nothing legible (#43) a lone answer needs `accept` and `margin` on a unique artwork
    # (xy11-25 was answered alone as another artwork at 0.862); from this similarity up such a card races
    # with the picture's next best card instead, and under it nothing is answered. On the validation
    # photos of `close_similarity` below, every such race was at >= 0.87 with the true card first; none
    # fell between 0.78 and 0.85, so nothing says answering there is right.
    accept_alone: float = 0.85
    # Reprints of one artwork are told apart by each one's footer line scored against the crop (CTC): the
    # likeliest wins alone with this share of the group's probability...
    footer_accept: float = 0.9
    # ...and answers alone only when the likeliest line scores this per glyph (geometric mean; glare and
    # blur leave every line unlikely, and a reader trained on photos guesses them with confidence). With
    # the photo-trained reader (crnn-mbv3s-cpu-legible, #13) chosen on validation photos
    # (`benchmarks/fusion_sweep.py --grid footer --standard 200 --hard 400 --nocard 200`, seeds 20,000,000+):
    # 0.2 made no confident wrong answer in 600 card photos and put the true card among the matches of
    # 99.0% of hard shared-artwork ones; 0.03 made 6 wrong, 0.1 one, 0.3 put one hard reprint second.
    # (With the reader before it, which never saw a photo, 0.03 was best: docs/hard-photos.md.)
    footer_floor: float = 0.2
    # A lower floor below which the odds still order a race of the artwork's reprints but never answer
    # one alone (the race holds the same cards either way): 0.03, 0.1 and 0.2 measured the same on the
    # validation photos above; 0.0 and 0.01 ordered hard reprints worse (top-1 76.5-82.5% vs 83.5%).
    footer_order_floor: float = 0.03
    # With nothing legible, "nothing looked close" (spec rule 4: `print_unreadable`) means the best card
    # scores under this, about what photos with no card in them reach; at or above it the best artwork's
    # reprints race (#43). Chosen on validation photos of training.synth only (seeds 20,000,000+, apart
    # from every benchmark's): first 0.78 with cardnet-v3 (`benchmarks/fusion_sweep.py --grid close`,
    # results/fusion_sweep_close.json, docs/hard-photos.md#the-close-bound); with cardnet-v6 (#43's
    # embedder held to v3's clean faces), `--grid close --standard 0 --hard 200 --hard-bucket harsh
    # --nocard 200 --empty 300` matched 0.6% of the 500 no-card scenes (card backs, empty holders) at
    # 0.78 and none at 0.80 (results/fusion_sweep_close_empty_embedder_v6.json): the highest bound with
    # no-card matches <= 0.5% and the hard figures at their best is 0.80.
    close_similarity: float = 0.80
    # Confidence tiers (#44, `with_tier`): a lone answer the print (or the footer's odds) backs is
    # `certain` from `certain_with_print` up; one the picture alone gave (a unique artwork) from
    # `certain_picture` up; any other lone answer is `likely`; a race or no answer is `review`. Chosen on
    # validation photos (`benchmarks/fusion_sweep.py --grid tiers --standard 600 --hard 600 --nocard 200`,
    # results/fusion_sweep_tiers.json): no lone answer of either kind was wrong at any bound, so each is
    # the bound its answers already need (`accept_with_print`, `accept`); an operator whose photos show
    # wrong `certain` answers raises them.
    certain_with_print: float = 0.82
    certain_picture: float = 0.95


@dataclass
class Decision:
    matches: list[tuple[str, float]] = field(default_factory=list)
    reason: UnidentifiedReason | None = None
    message: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    tier: Tier = "review"

    def as_dict(self) -> ScanDecision:
        """The decision as the scan contract's answer (`core.scan_contract`)."""
        unidentified: Unidentified | None = None
        if self.reason is not None:
            unidentified = {"reason": self.reason, "message": self.message or ""}
        return {
            "matches": [{"card_id": card_id, "score": score} for card_id, score in self.matches],
            "unidentified": unidentified,
            "details": self.details,
            "tier": self.tier,
        }


class PrintTable:
    """Every indexed card's print, with lookups by number and set code."""

    def __init__(self, cards: Iterable[CardPrint]) -> None:
        self.cards: dict[str, CardPrint] = {card.id: card for card in cards}
        self.by_number: dict[str, list[str]] = defaultdict(list)
        self.by_artwork: dict[str, list[str]] = defaultdict(list)
        self.codes: set[str] = set()
        for card in self.cards.values():
            self.by_artwork[card.artwork].append(card.id)
            if card.number_key:
                self.by_number[card.number_key].append(card.id)
            if card.set_code:
                self.codes.add(card.set_code.upper())

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> PrintTable:
        return cls(
            CardPrint(
                id=str(r["id"]),
                name=str(r["name"]),
                number=r.get("number"),
                set_code=r.get("set_code"),
                printed_total=r.get("printed_total"),
                artwork=str(r.get("artwork") or r["id"]),
            )
            for r in records
        )


@dataclass(frozen=True)
class Print:
    """The parts of a read that are usable: confident, and pointing at some catalog card."""

    number: str | None = None
    total: str | None = None  # the printed "/198": the expansion's official count
    code: str | None = None
    name: str | None = None

    @property
    def legible(self) -> bool:
        return self.number is not None or self.code is not None


def _total(value: str | None) -> str | None:
    digits = (value or "").strip()
    return str(int(digits)) if digits.isdigit() else None


# Glyph pairs the reader confuses in the code box: the H100-trained weights read every ASR as A5R.
_CONFUSABLE = dict(zip("5S0O1I8B2Z6G", "S5O0I1B8Z2G6", strict=True))


def snap_code(code: str, known: set[str]) -> str | None:
    """A read set code as a known one: itself, or the only known code one confusable glyph swap away
    (5/S, 0/O, 1/I, 8/B, 2/Z, 6/G); None when it names no expansion either way."""
    if code in known:
        return code
    swaps = {code[:i] + _CONFUSABLE[ch] + code[i + 1 :] for i, ch in enumerate(code) if ch in _CONFUSABLE}
    options = swaps & known
    return options.pop() if len(options) == 1 else None


def interpret(read: Read | None, table: PrintTable, t: Thresholds) -> Print:
    if read is None:
        return Print()
    number = number_key(read.number) if read.number_confidence >= t.field_confidence else None
    if number is not None and number not in table.by_number:
        number = None
    total = _total(read.printed_total) if number is not None else None
    pointed = [table.cards[i] for i in table.by_number.get(number or "", [])]
    if total is not None and not any(_total(c.printed_total) == total for c in pointed):
        total = None
    confident_code = read.set_code and read.set_code_confidence >= t.field_confidence
    code = read.set_code.strip().upper() if read.set_code and confident_code else None
    if code is not None:
        code = snap_code(code, table.codes)
    if (
        number is not None
        and code is not None
        and not any((c.set_code or "").upper() == code for c in pointed)
    ):
        # Number and code name no card together: keep the more confident of the two.
        if read.number_confidence >= read.set_code_confidence:
            code = None
        else:
            number = total = None
    name = read.name.strip() if read.name and read.name_confidence >= t.field_confidence else None
    return Print(number, total, code, name)


def _agrees(card: CardPrint, read: Print) -> bool:
    if read.number is not None and card.number_key != read.number:
        return False
    if read.total is not None and _total(card.printed_total) != read.total:
        return False
    return read.code is None or (card.set_code or "").upper() == read.code


def footer_candidates(hits: Hits, table: PrintTable, window: float = 0.05, limit: int = 32) -> list[str]:
    """The footer lines worth scoring for a photo: every reprint of each artwork the picture matched within
    `window` of its best hit (the artworks a race could hold; a reprint the index ranked low still shares
    its artwork's look), best first, at most `limit` (each costs the reader ~0.3 ms)."""
    lines: dict[str, None] = {}
    best = hits[0][1] if hits else 0.0
    for card_id, sim in hits:
        card = table.cards.get(card_id)
        if sim < best - window or len(lines) >= limit:
            break
        for other in table.by_artwork.get(card.artwork, []) if card else []:
            lines.setdefault(table.cards[other].footer, None)
    return list(lines)[:limit]


def footer_posterior(cards: list[CardPrint], scores: Mapping[str, float]) -> dict[str, float]:
    """P(card | footer crop) among `cards` with a uniform prior; empty when none of their lines was scored."""
    logp = {card.id: scores.get(card.footer, -math.inf) for card in cards}
    peak = max(logp.values(), default=-math.inf)
    if peak == -math.inf:
        return {}
    weights = {card_id: math.exp(value - peak) for card_id, value in logp.items()}
    total = sum(weights.values())
    return {card_id: weight / total for card_id, weight in weights.items()}


class FooterOdds(NamedTuple):
    """What an artwork's reprints' footer lines say: the likeliest reprint, the posterior over them, and
    whether the footer is legible enough to answer alone (`Thresholds.footer_floor`)."""

    likeliest: str
    posterior: dict[str, float]
    sure: bool


def footer_odds(group: list[CardPrint], scores: Mapping[str, float], t: Thresholds) -> FooterOdds | None:
    """The footer's odds over an artwork's reprints when the crop shows a footer at all: the likeliest
    line must score `footer_order_floor` per glyph (glare leaves every line unlikely, and then the odds
    among them are noise). None otherwise."""
    posterior = footer_posterior(group, scores)
    if not posterior:
        return None
    likeliest = max(posterior, key=lambda card_id: (posterior[card_id], card_id))
    line = next(card.footer for card in group if card.id == likeliest)
    per_glyph = math.exp(scores[line] / max(1, len(line)))
    if per_glyph < t.footer_order_floor:
        return None
    return FooterOdds(likeliest, posterior, per_glyph >= t.footer_floor)


def decide(
    similar: Mapping[str, float], read: Read | None, table: PrintTable, t: Thresholds | None = None
) -> Decision:
    """`similar`: candidate card id -> cosine similarity of the photo to its face (best orientation)."""
    t = t or Thresholds()
    return with_tier(_decide(similar, read, table, t), t)


def with_tier(decision: Decision, t: Thresholds) -> Decision:
    """The decision with its confidence tier: `certain` for one card that the print backs
    (`basis` print or footer) at `certain_with_print`, or that the picture alone is sure of (`basis`
    picture, a unique artwork past `accept` and `margin`) at `certain_picture`; `likely` for any other
    lone answer; `review` for a race (the picture cannot tell which card) and for no answer."""
    if len(decision.matches) != 1:
        decision.tier = "review"
        return decision
    basis, similarity = decision.details.get("basis"), decision.matches[0][1]
    backed = basis in ("print", "footer") and similarity >= t.certain_with_print
    sure = basis == "picture" and similarity >= t.certain_picture
    decision.tier = "certain" if backed or sure else "likely"
    return decision


def _decide(similar: Mapping[str, float], read: Read | None, table: PrintTable, t: Thresholds) -> Decision:
    printed = interpret(read, table, t)
    legible, name = printed.legible, printed.name
    candidates = {card_id: sim for card_id, sim in similar.items() if card_id in table.cards}
    details: dict[str, Any] = dataclasses.asdict(printed)
    if legible:
        # Cards the print names are candidates even when the picture ranked them low (glare on the art).
        for card_id in table.by_number.get(printed.number or "", []):
            candidates.setdefault(card_id, 0.0)
        pool = [(cid, sim) for cid, sim in candidates.items() if _agrees(table.cards[cid], printed)]
    else:
        pool = list(candidates.items())
    if name is not None and legible and pool:
        # A confidently read name that fits some agreeing card narrows further (different cards can share
        # a number across sets); one that fits none is discarded.
        named = [
            (cid, sim)
            for cid, sim in pool
            if fuzz.ratio(name.casefold(), table.cards[cid].name.casefold()) >= 80
        ]
        pool = named or pool
    pool.sort(key=lambda item: (-item[1], item[0]))
    best_sim = pool[0][1] if pool else 0.0
    if legible:
        # A print that leaves out the one artwork the picture alone is sure of was misread (a glyph off
        # names another card): it is discarded, like text that names no card, and the footer's odds still
        # tell that artwork's reprints apart.
        footer_only = Read(footer_scores=read.footer_scores) if read else None
        picture = _decide(similar, footer_only, table, t)
        if _sure_of_one_artwork(picture, table, t):
            artwork = table.cards[picture.matches[0][0]].artwork
            if not any(table.cards[cid].artwork == artwork for cid, sim in pool if sim >= t.min_similarity):
                picture.details["discarded_print"] = details
                picture.details["basis"] = "picture_over_print"  # read and picture disagreed: never certain
                return picture
    if not pool or best_sim < (t.min_similarity if legible else t.close_similarity):
        return _unidentified(legible, details)
    top = table.cards[pool[0][0]]
    same_art = [(cid, sim) for cid, sim in pool if table.cards[cid].artwork == top.artwork]
    other_art = [(cid, sim) for cid, sim in pool if table.cards[cid].artwork != top.artwork]
    margin = best_sim - (other_art[0][1] if other_art else 0.0)
    details.update(best_similarity=round(best_sim, 4), margin=round(margin, 4), same_artwork=len(same_art))
    reprints = [table.cards[cid] for cid in table.by_artwork[top.artwork]]
    footer = footer_odds(reprints, read.footer_scores if read else {}, t) if len(reprints) > 1 else None
    odds: Mapping[str, float] = {}
    if footer is not None:
        # The footer's odds decide among the artwork's reprints, the best-path read notwithstanding: they
        # weigh every reading of the crop, not only its likeliest glyphs.
        likeliest, odds, sure = footer
        details["footer_odds"] = {cid: round(p, 4) for cid, p in odds.items() if p >= 0.01}
        # ...among the reprints the picture has not ruled out: one the search left out of the race window
        # differs from the photo in frame or finish (sm7-140 beside its gold sm7-181; validation photo
        # 21,000,160 was answered sm7-140 alone at 0.959 on the footer while the picture put it outside
        # the 32 nearest).
        in_view = candidates.get(likeliest, 0.0) >= best_sim - t.race_window
        if sure and in_view and odds[likeliest] >= t.footer_accept and best_sim >= t.accept_with_print:
            return Decision(matches=[(likeliest, _score(best_sim))], details={**details, "basis": "footer"})
        # To the picture the reprints are one artwork: in a race they share its similarity and go in the
        # order of their footers' odds.
        pool = [(cid, best_sim if cid in odds else sim) for cid, sim in pool]
        pool.sort(key=lambda item: (-item[1], -odds.get(item[0], 0.0), item[0]))
    if not legible:
        return _unread_answer(top.artwork, best_sim, margin, pool, read, candidates, table, t, details)
    # From here on the print is legible: it backs a lone answer at `accept_with_print`.
    single = len(same_art) == 1 and (
        best_sim >= t.accept_with_print or (best_sim >= t.accept and margin >= t.margin)
    )
    if single and (siblings := near_siblings(top, printed, table)):
        # The print names one reprint, but a glyph misread would name another of the same artwork (me01-171
        # read as me01-121): the print does not back a lone answer, and the footer's odds did not either
        # (they answer alone above). A race of those reprints, the one read first.
        siblings.sort(key=lambda card: (-odds.get(card.id, 0.0), -candidates.get(card.id, 0.0), card.id))
        answer = [top, *siblings][:MAX_MATCHES]
        details["near_siblings"] = [card.id for card in siblings]
        return Decision(matches=[(card.id, _score(best_sim)) for card in answer], details=details)
    if single:
        return Decision(matches=[(top.id, _score(best_sim))], details={**details, "basis": "print"})
    race = [(cid, sim) for cid, sim in pool if sim >= best_sim - t.race_window][:MAX_MATCHES]
    if len(race) < 2:
        # One card alone is not a race: with the print legible it is answered when the picture is close
        # enough to stand alone, and otherwise nothing is (a single match claims a confidence it would lack).
        if best_sim >= t.accept_alone:  # the print agrees but does not single it out
            agrees = {**details, "basis": "print_agrees"}
            return Decision(matches=[(top.id, _score(best_sim))], details=agrees)
        return _unidentified(legible, details)
    return Decision(matches=[(cid, _score(sim)) for cid, sim in race], details=details)


def picture_answer(
    similar: Mapping[str, float], table: PrintTable, t: Thresholds | None = None
) -> Decision | None:
    """`decide`'s answer for these search hits when no read of the face could change it, else None: then
    the scanner need not read the face at all (#12: reading was a fifth of a scan's CPU, and on most
    photos of a unique artwork it changes nothing).

    No read can change it when the picture alone (`decide` with no read) answers one card whose artwork
    has no reprint. Whatever is read, `_decide` then answers that card alone at its similarity:
    - nothing legible: the same pool and rules as with no read (footer odds and `reprint_order` only
      order reprints, and the card has none);
    - a legible print that agrees with the card: it is the best of the agreeing pool (the picture's best
      of all) with no reprint or near sibling beside it, and the pool, a subset of the picture's, holds
      no other card the picture's rules would have raced with it or that would shrink its margin;
    - a legible print that leaves the card out: the picture is sure of one card, so the print is
      discarded as misread and the picture's answer stands.
    `tests/serve_app/test_fusion.py` checks this against `decide` with adversarial reads."""
    t = t or Thresholds()
    picture = _decide(similar, None, table, t)
    if len(picture.matches) != 1 or len(table.by_artwork[table.cards[picture.matches[0][0]].artwork]) > 1:
        return None
    picture.details["print"] = "not read: no read could change this answer"
    return with_tier(picture, t)


def first_look_answer(
    similar: Mapping[str, float], table: PrintTable, t: Thresholds | None = None
) -> Decision | None:
    """What the scan cascade's first look may answer (#47): `picture_answer`'s decision where it is
    `certain` (one unique artwork the picture is sure of, so no read could change it), else None and the
    photo goes through the full pipeline. A reprint is never answered here: its answer rests on reading
    its print, and a print read off the first look's rougher corners once named the wrong reprint surely
    (a 0.5 MP photo of smp-SM198 read as det1-1:
    benchmarks/results/scan_load_cascade_read_not_shipped.json)."""
    answer = picture_answer(similar, table, t)
    return answer if answer is not None and answer.tier == "certain" else None


def _unread_answer(
    artwork: str,
    best_sim: float,
    margin: float,
    pool: list[tuple[str, float]],
    read: Read | None,
    candidates: Mapping[str, float],
    table: PrintTable,
    t: Thresholds,
    details: dict[str, Any],
) -> Decision:
    """Nothing legible, the footer's odds single out no reprint, and the picture is closer than photos
    with no card get (`close_similarity`): spec rule 2 leaves similarity to decide alone, less sharply.

    A unique artwork the picture is sure of (`accept`, `margin` over every other artwork) is answered
    alone. Otherwise a race: the best artwork's reprints first (to the picture they are one card, so each
    at the artwork's similarity; up to five, ordered by the footer's odds where they count, else
    `reprint_order`), then other cards within `race_window` (look-alike artworks). A unique artwork with
    no other card that close races with the picture's next best card from `accept_alone` up (one card
    alone would claim a confidence the picture lacks: #43's xy11-25 answered alone as another artwork at
    0.862), and below it is `print_unreadable`: a race with a card far behind would be a guessed list."""
    group = [table.cards[card_id] for card_id in table.by_artwork[artwork]]
    details.update(best_similarity=round(best_sim, 4), margin=round(margin, 4), same_artwork=len(group))
    if len(group) == 1 and best_sim >= t.accept and margin >= t.margin:
        return Decision(matches=[(group[0].id, _score(best_sim))], details={**details, "basis": "picture"})
    details["race_artwork"] = artwork
    footer = footer_odds(group, read.footer_scores if read else {}, t) if len(group) > 1 else None
    if footer is not None and (footer.sure or len(group) <= MAX_MATCHES):
        # Faint odds only order a group that fits in the race; choosing five of a larger one is
        # `reprint_order`'s (#13). The reprints the search found within the race window go first: those
        # it left out differ from the photo in frame or set symbol (xyp-XY28 against its set reprints).
        odds = footer.posterior
        details["footer_odds"] = {cid: round(p, 4) for cid, p in odds.items() if p >= 0.01}
        near = {cid for cid, sim in candidates.items() if sim >= best_sim - t.race_window}
        group.sort(key=lambda c: (c.id not in near, -odds[c.id], -candidates.get(c.id, 0.0), c.id))
    else:
        group = reprint_order(group, read, candidates, table)
    race = [(card.id, best_sim) for card in group[:MAX_MATCHES]]
    others = [(cid, sim) for cid, sim in pool if table.cards[cid].artwork != artwork]
    race += [(cid, sim) for cid, sim in others if sim >= best_sim - t.race_window][: MAX_MATCHES - len(race)]
    if len(race) < 2 and others and best_sim >= t.accept_alone:
        details["nearest_rival"] = others[0][0]
        race.append(others[0])
    if len(race) < 2:
        return _unidentified(False, details)
    return Decision(matches=[(cid, _score(sim)) for cid, sim in race], details=details)


def reprint_order(
    group: list[CardPrint], read: Read | None, similar: Mapping[str, float], table: PrintTable
) -> list[CardPrint]:
    """An artwork's reprints best first when the footer is too blurred for its odds to count (#13: five
    of a larger group must still hold the photo's card). The picture first: reprints differ in frame,
    set symbol and footer, and on validation photos even its smallest differences put the right card
    first more often than anything read below the floor. Then, for reprints the search did not return
    (similarity 0) and ties, what the print still shows: how many read fields agree with the card at
    any confidence (the set code, snapped to a known one; the printed total; the number, by the share
    of its glyphs that match, so '17' counts for 171 more than for 121); then the card's footer line's
    log P under CTC (scored even below the floor); then the id."""
    scores = read.footer_scores if read else {}
    code = snap_code(read.set_code.strip().upper(), table.codes) if read and read.set_code else None
    total = _total(read.printed_total) if read else None
    number = number_key(read.number) if read and read.number else None

    def key(card: CardPrint) -> tuple[float, float, float, str]:
        agree = 0.0
        if code is not None and (card.set_code or "").upper() == code:
            agree += 1.0
        if total is not None and _total(card.printed_total) == total:
            agree += 1.0
        if number is not None and card.number_key:
            agree += fuzz.ratio(number, card.number_key) / 100
        return (-similar.get(card.id, 0.0), -agree, -scores.get(card.footer, -math.inf), card.id)

    return sorted(group, key=key)


def near_siblings(card: CardPrint, printed: Print, table: PrintTable) -> list[CardPrint]:
    """The other reprints of `card`'s artwork the print would name if one glyph of its number were
    misread (substituted, dropped or added: 121 for 171, 56 for 156), agreeing with the rest of it."""
    if printed.number is None:
        return []
    out = []
    for other_id in table.by_artwork[card.artwork]:
        other = table.cards[other_id]
        if other.id == card.id or other.number_key is None:
            continue
        if Levenshtein.distance(printed.number, other.number_key) == 1 and _agrees(
            other, dataclasses.replace(printed, number=other.number_key)
        ):
            out.append(other)
    return out


def _unidentified(legible: bool, details: dict[str, Any]) -> Decision:
    """No answer: the print was read but names nothing that matches, or nothing was read at all."""
    if legible:
        return Decision(reason="no_confident_match", message=PRINT_MATCHES_NOTHING, details=details)
    return Decision(reason="print_unreadable", message=PRINT_UNREADABLE, details=details)


def _sure_of_one_artwork(decision: Decision, table: PrintTable, t: Thresholds) -> bool:
    """One match, or a race among reprints of one artwork that the picture alone would accept."""
    if len(decision.matches) == 1:
        return True
    artworks = {table.cards[card_id].artwork for card_id, _ in decision.matches}
    sure = decision.details.get("best_similarity", 0.0) >= t.accept
    return len(artworks) == 1 and sure and decision.details.get("margin", 0.0) >= t.margin


def better_turn(face: Any, turned: Any, upright: Hits, upside_down: Hits) -> tuple[Any, Hits]:
    """The face the right way up, with its hits: the one whose best catalog match is closer (the detector
    leaves open which short side is the top)."""
    best = [hits[0][1] if hits else -1.0 for hits in (upright, upside_down)]
    return (face, upright) if best[0] >= best[1] else (turned, upside_down)


def _score(similarity: float) -> float:
    return round(min(1.0, max(0.0, similarity)), 4)
