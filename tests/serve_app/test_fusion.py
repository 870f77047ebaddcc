"""The fusion rules of the spec (scan behaviour 2-5), on a hand-made print table."""

from __future__ import annotations

import dataclasses
import itertools
import random

from serve_app.fusion import (
    CardPrint,
    PrintTable,
    Read,
    Thresholds,
    decide,
    footer_candidates,
    number_key,
    picture_answer,
    snap_code,
)

TABLE = PrintTable(
    [
        CardPrint("base1-4", "Charizard", "4", "BS", "102", "Charizard|Mitsuhiro Arita"),
        CardPrint("base4-4", "Charizard", "4", "B2", "130", "Charizard|Mitsuhiro Arita"),
        CardPrint("base1-2", "Blastoise", "2", "BS", "102", "Blastoise|Ken Sugimori"),
        CardPrint("base1-15", "Venusaur", "15", "BS", "102", "Venusaur|Mitsuhiro Arita"),
        CardPrint("swsh10tg-TG05", "Gardevoir", "TG05", "ASR", None, "Gardevoir|Someone"),
        CardPrint("sma-SV1", "Scyther", "SV1", None, None, "Scyther|Other"),
    ]
)


def read(
    number: str | None = None, code: str | None = None, name: str | None = None, conf: float = 0.9
) -> Read:
    return Read(
        name=name,
        name_confidence=conf if name else 0.0,
        number=number,
        number_confidence=conf if number else 0.0,
        set_code=code,
        set_code_confidence=conf if code else 0.0,
    )


def test_number_keys_fold_padding_and_totals():
    assert number_key("025/198") == "25" and number_key("TG05") == "TG5" and number_key("tg5") == "TG5"
    assert number_key("SV001") == "SV1" and number_key(None) is None


def test_print_tells_reprints_that_share_artwork_apart():
    similar = {"base1-4": 0.96, "base4-4": 0.97, "base1-2": 0.80}
    decision = decide(similar, read("004/102", "BS"), TABLE)
    assert decision.matches == [("base1-4", 0.96)] and decision.reason is None
    decision = decide(similar, read("004/130", "B2"), TABLE)
    assert [m[0] for m in decision.matches] == ["base4-4"]


def test_printed_total_tells_reprints_apart_without_the_set_code():
    similar = {"base1-4": 0.96, "base4-4": 0.97}
    reading = Read(number="004", number_confidence=0.9, printed_total="102")
    assert [m[0] for m in decide(similar, reading, TABLE).matches] == ["base1-4"]
    reading = Read(number="004", number_confidence=0.9, printed_total="999")  # matches no card: dropped
    assert len(decide(similar, reading, TABLE).matches) == 2


def test_unreadable_print_on_shared_artwork_is_a_close_race_not_a_guess():
    decision = decide({"base1-4": 0.96, "base4-4": 0.97, "base1-2": 0.80}, read(), TABLE)
    assert [m[0] for m in decision.matches] == ["base4-4", "base1-4"]
    assert decision.reason is None


def test_picture_alone_decides_a_unique_artwork_when_confident():
    decision = decide({"base1-2": 0.97, "base1-15": 0.80}, None, TABLE)
    assert decision.matches == [("base1-2", 0.97)]


def test_close_race_without_print_returns_up_to_five():
    similar = {"base1-2": 0.90, "base1-15": 0.89, "sma-SV1": 0.87}
    decision = decide(similar, read(), TABLE)
    assert [m[0] for m in decision.matches] == ["base1-2", "base1-15", "sma-SV1"]
    assert [m[1] for m in decision.matches] == sorted((m[1] for m in decision.matches), reverse=True)


def test_nothing_close_and_nothing_read_is_print_unreadable():
    decision = decide({"base1-2": 0.50}, read(), TABLE)
    assert decision.matches == [] and decision.reason == "print_unreadable" and decision.message


def test_print_read_but_artwork_disagrees_is_no_confident_match():
    decision = decide({"base1-2": 0.60}, read("TG05", "ASR"), TABLE)
    assert decision.matches == [] and decision.reason == "no_confident_match"


def test_text_that_matches_no_card_is_discarded():
    similar = {"base1-2": 0.97, "base1-15": 0.80}
    # "999" and "ZZZ" point at no catalog card: the read is dropped and the picture decides.
    decision = decide(similar, read("999", "ZZZ"), TABLE)
    assert decision.matches == [("base1-2", 0.97)]


def test_a_code_one_confusable_glyph_off_counts_as_that_code():
    assert snap_code("A5R", {"ASR", "BS"}) == "ASR" and snap_code("8S", {"BS", "B2"}) == "BS"
    assert snap_code("BS", {"BS", "B5"}) == "BS"  # a known code stays itself
    assert snap_code("Q5", {"BS"}) is None  # not one swap from any code
    assert snap_code("5O", {"SO", "50"}) is None  # one swap from two codes: ambiguous, dropped
    # "B5" is one swap from BS alone, so it tells Charizard's reprints apart like BS would.
    decision = decide({"base1-4": 0.96, "base4-4": 0.97}, read("4", "B5"), TABLE)
    assert decision.matches == [("base1-4", 0.96)]


def test_print_restricts_candidates_even_against_a_higher_similarity():
    similar = {"base1-2": 0.93, "base1-15": 0.88}
    decision = decide(similar, read("15", "BS"), TABLE)
    assert decision.matches == [("base1-15", 0.88)]


def test_print_brings_in_a_card_the_picture_ranked_low():
    decision = decide({"base1-2": 0.62}, read("SV001"), TABLE)
    assert decision.reason == "no_confident_match", "SV1 was named but looks nothing like the photo"
    decision = decide({"sma-SV1": 0.85, "base1-2": 0.90}, read("SV001"), TABLE)
    assert decision.matches == [("sma-SV1", 0.85)]


def test_a_misread_print_does_not_overrule_a_sure_picture():
    # "2" names base1-2 (Blastoise), which looks nothing like this photo of Venusaur: a misread.
    decision = decide({"base1-15": 0.98, "base1-2": 0.40}, read("002", "BS"), TABLE)
    assert decision.matches == [("base1-15", 0.98)]
    assert decision.details["discarded_print"]["number"] == "2"


def test_a_misread_naming_a_look_alike_does_not_overrule_a_sure_picture():
    """The print names a card that looks somewhat like the photo (0.85, enough for a print-backed answer),
    but the picture is sure of another artwork: a glyph was misread, and the picture decides."""
    similar = {"base1-15": 0.98, "base1-2": 0.85}
    decision = decide(similar, read("002", "BS"), TABLE)
    assert decision.matches == [("base1-15", 0.98)]
    assert decision.details["discarded_print"]["number"] == "2"
    # A print that agrees with the sure picture is kept (and the answer is the same card).
    assert "discarded_print" not in decide(similar, read("015", "BS"), TABLE).details


def test_a_lone_card_short_of_sure_with_nothing_read_races_its_nearest_rival():
    """#43: with nothing legible, a unique artwork short of sure (`accept` 0.95 with `margin` 0.03) is not
    answered alone: at 0.87 the picture races it with its next best card (a73d9a9 answered it alone), at
    0.83 (under `accept_alone`) nothing is answered. With a legible print that names it, the print backs
    a lone answer at `accept_with_print` (0.82)."""
    decision = decide({"base1-2": 0.87, "base1-15": 0.70}, read(), TABLE)
    assert decision.matches == [("base1-2", 0.87), ("base1-15", 0.70)]
    assert decision.reason is None and decision.details["nearest_rival"] == "base1-15"
    decision = decide({"base1-2": 0.83, "base1-15": 0.70}, read(), TABLE)
    assert decision.matches == [] and decision.reason == "print_unreadable"
    decision = decide({"base1-2": 0.83, "base1-15": 0.70}, read("2", "BS"), TABLE)
    assert decision.matches == [("base1-2", 0.83)]


def test_a_misread_print_over_a_reprinted_artwork_leaves_its_reprints_to_the_footer_odds():
    """ "015/102 BS" names Venusaur, which looks nothing like this photo of Charizard. The picture is sure
    of the artwork, so the read is a misread: a race of Charizard's reprints, or the one the odds pick."""
    similar = {"base1-4": 0.97, "base4-4": 0.97, "base1-2": 0.80}
    decision = decide(similar, read("015/102", "BS"), TABLE)
    assert [m[0] for m in decision.matches] == ["base1-4", "base4-4"]
    assert decision.details["discarded_print"]["number"] == "15"
    misread = dataclasses.replace(read("015/102", "BS"), footer_scores=footers(base1_4=-7.0, base4_4=-0.6))
    assert decide(similar, misread, TABLE).matches == [("base4-4", 0.97)]
    # ...but a picture unsure of the artwork (Charizard 0.90, Blastoise 0.89) does not overrule the print
    decision = decide({"base1-4": 0.90, "base4-4": 0.90, "base1-2": 0.89}, read("015/102", "BS"), TABLE)
    assert decision.reason == "no_confident_match"


def test_low_confidence_fields_count_as_unread():
    similar = {"base1-4": 0.96, "base4-4": 0.97}
    decision = decide(similar, read("004/102", "BS", conf=0.2), TABLE)
    assert len(decision.matches) == 2


def test_scores_are_in_unit_range_and_at_most_five():
    similar = {card: 1.3 - i * 0.01 for i, card in enumerate(TABLE.cards)}
    decision = decide(similar, read(), TABLE)
    assert 1 <= len(decision.matches) <= 5
    assert all(0 <= score <= 1 for _, score in decision.matches)


def footers(**log_p: float) -> dict[str, float]:
    """Footer scores by card: base1-4 prints 'BS 004/102', base4-4 prints 'B2 004/130'."""
    lines = {"base1_4": "BS 004/102", "base4_4": "B2 004/130"}
    return {lines[key]: value for key, value in log_p.items()}


def test_footer_scores_pick_the_reprint_when_the_best_path_is_unsure():
    similar = {"base1-4": 0.96, "base4-4": 0.97, "base1-2": 0.80}
    decision = decide(similar, Read(footer_scores=footers(base1_4=-0.5, base4_4=-9.0)), TABLE)
    assert decision.matches == [("base1-4", 0.97)]  # the artwork's similarity: to the picture they are one
    assert TABLE.cards["base1-4"].footer == "BS 004/102" and TABLE.cards["sma-SV1"].footer == "SV1"


def test_footer_scores_outweigh_a_confident_best_path_among_reprints():
    similar = {"base1-4": 0.96, "base4-4": 0.97}
    reading = dataclasses.replace(read("004/130", "B2"), footer_scores=footers(base1_4=-0.4, base4_4=-6.0))
    assert [m[0] for m in decide(similar, reading, TABLE).matches] == ["base1-4"]


def test_close_footer_odds_are_a_race_in_their_order():
    similar = {"base1-4": 0.96, "base4-4": 0.97, "base1-2": 0.80}
    decision = decide(similar, Read(footer_scores=footers(base1_4=-1.0, base4_4=-1.3)), TABLE)
    assert decision.matches == [("base1-4", 0.97), ("base4-4", 0.97)]


def test_footers_all_unlikely_per_glyph_leave_the_picture_to_order_the_race():
    """Glare over the footer: one line far likelier than the other, but neither legible (per glyph
    exp(-60 / 10) = 0.0025, under the 0.03 floor for ordering)."""
    similar = {"base1-4": 0.96, "base4-4": 0.97}
    decision = decide(similar, Read(footer_scores=footers(base1_4=-60.0, base4_4=-80.0)), TABLE)
    assert decision.matches == [("base4-4", 0.97), ("base1-4", 0.97)]  # one artwork: one similarity


def test_a_faint_footer_orders_the_race_but_never_answers_alone():
    """With two floors (`footer_order_floor` 0.03, `footer_floor` 0.2, the defaults: what a reader that
    guesses under glare needs), a footer at exp(-25 / 10) = 0.08 per glyph only puts its likeliest reprint
    first, odds of e^15 to 1 notwithstanding: the race holds the same cards. A legible one answers alone;
    at one floor of 0.03 (the reader before #13's) the faint one does too."""
    similar = {"base1-4": 0.96, "base4-4": 0.97}
    two_floors = Thresholds()
    faint = Read(footer_scores=footers(base1_4=-25.0, base4_4=-40.0))
    assert decide(similar, faint, TABLE, two_floors).matches == [("base1-4", 0.97), ("base4-4", 0.97)]
    legible = Read(footer_scores=footers(base1_4=-2.0, base4_4=-17.0))
    assert decide(similar, legible, TABLE, two_floors).matches == [("base1-4", 0.97)]
    one_floor = Thresholds(footer_floor=0.03, footer_order_floor=0.03)
    assert decide(similar, faint, TABLE, one_floor).matches == [("base1-4", 0.97)]


def test_footer_candidates_cover_every_reprint_of_the_artworks_in_the_race():
    hits = [("base4-4", 0.97), ("base1-2", 0.93), ("base1-15", 0.90)]
    assert footer_candidates(hits, TABLE, window=0.05) == ["BS 004/102", "B2 004/130", "BS 002/102"]
    assert footer_candidates(hits, TABLE, window=0.01) == ["BS 004/102", "B2 004/130"]
    assert footer_candidates(hits, TABLE, window=0.05, limit=1) == ["BS 004/102"]


# Issue #13's rules, on a table with a big reprint group and same-expansion siblings one glyph apart.
GROUPS = PrintTable(
    [
        *(
            CardPrint(card_id, "Lycanroc GX", number, code, total, "Lycanroc GX|5ban")
            for card_id, number, code, total in [
                ("sm2-74", "74", "GRI", "145"),
                ("sm2-138", "138", "GRI", "145"),
                ("sm2-156", "156", "GRI", "145"),
                ("sm3-136", "136", "BUS", "147"),
                ("sm3-155", "155", "BUS", "147"),
                ("sm9-82", "82", "TEU", "181"),
                ("smp-SM14", "SM14", None, None),
            ]
        ),
        CardPrint("me01-121", "Mega Signal", "121", "MEG", "132", "Mega Signal|inose"),
        CardPrint("me01-171", "Mega Signal", "171", "MEG", "132", "Mega Signal|inose"),
        CardPrint("me02.5-193", "Mega Signal", "193", "ASC", "217", "Mega Signal|inose"),
        CardPrint("sv01-25", "Pawmi", "25", "SVI", "198", "Pawmi|Someone"),
        CardPrint("sv02-30", "Tarountula", "30", "PAL", "193", "Tarountula|Other"),
    ]
)


def test_an_unreadable_print_over_a_sure_reprinted_artwork_answers_its_group_not_print_unreadable():
    """One reprint found by the picture, at a similarity too low to stand alone (0.84 < accept_alone), but
    every other artwork is far below: the picture knows the artwork, so its reprints race."""
    similar = {"me01-171": 0.84, "sv01-25": 0.66, "sv02-30": 0.64}
    decision = decide(similar, Read(), GROUPS)
    assert decision.reason is None
    assert [m[0] for m in decision.matches][:1] == ["me01-171"]  # the picture's own hit first
    assert sorted(m[0] for m in decision.matches) == ["me01-121", "me01-171", "me02.5-193"]
    assert {score for _, score in decision.matches} == {0.84}  # one artwork: one similarity
    # A picture torn between two artworks still answers the best one's reprints first, the look-alike
    # within the race window after them (#43: no margin is asked of a race).
    torn = decide({"me01-171": 0.84, "sv01-25": 0.83, "sv02-30": 0.64}, Read(), GROUPS)
    assert [m[0] for m in torn.matches] == ["me01-171", "me01-121", "me02.5-193", "sv01-25"]
    # Nothing close (under `close_similarity`: a photo with no card reaches that): print_unreadable.
    t = Thresholds(close_similarity=0.7)
    assert decide({"sv01-25": 0.69, "sv02-30": 0.60}, Read(), GROUPS, t).reason == "print_unreadable"


def test_a_unique_artwork_is_answered_alone_only_when_the_picture_is_sure():
    """The margin that names a reprint group does not make a lone answer: a unique artwork at 0.88 with
    nothing read is a race with the next best card, at 0.84 nothing; at `accept` (0.95) with `margin`
    it is the answer alone."""
    decision = decide({"sv01-25": 0.84, "me01-121": 0.70, "sv02-30": 0.69}, Read(), GROUPS)
    assert decision.matches == [] and decision.reason == "print_unreadable"
    decision = decide({"sv01-25": 0.88, "me01-121": 0.70, "sv02-30": 0.69}, Read(), GROUPS)
    assert decision.matches == [("sv01-25", 0.88), ("me01-121", 0.70)]
    decision = decide({"sv01-25": 0.96, "me01-121": 0.70, "sv02-30": 0.69}, Read(), GROUPS)
    assert decision.matches == [("sv01-25", 0.96)]


def test_a_group_larger_than_five_keeps_the_card_that_part_of_the_number_names():
    """Seven Lycanroc reprints; the search returned four of them (the picture orders those), not sm9-82.
    The fifth place goes to the reprint that an unconfident read of '82' (or of its total '181', or of
    its code) points at, not to the next one by id."""
    similar = {"sm2-74": 0.929, "sm2-138": 0.928, "sm2-156": 0.927, "sm3-136": 0.926, "sv01-25": 0.70}
    unread = decide(similar, Read(), GROUPS)
    assert [m[0] for m in unread.matches] == ["sm2-74", "sm2-138", "sm2-156", "sm3-136", "sm3-155"]
    assert {score for _, score in unread.matches} == {0.929}  # one artwork: one similarity
    for reading in (
        Read(number="82", number_confidence=0.3),
        Read(number="8?", number_confidence=0.2, printed_total="181"),
        Read(set_code="TEU", set_code_confidence=0.4),
    ):
        decision = decide(similar, reading, GROUPS)
        assert decision.reason is None, reading
        assert [m[0] for m in decision.matches] == ["sm2-74", "sm2-138", "sm2-156", "sm3-136", "sm9-82"]
    # Footer lines scored under the floor still choose when nothing else was read.
    blurred = Read(
        footer_scores={GROUPS.cards["sm9-82"].footer: -40.0, GROUPS.cards["sm3-155"].footer: -60.0}
    )
    assert decide(similar, blurred, GROUPS).matches[4][0] == "sm9-82"


def test_a_print_one_glyph_from_a_same_art_sibling_is_a_race_not_a_lone_wrong_answer():
    """me01-171 photographed, '121' read confidently: the picture fits all three Mega Signals. The print
    names me01-121, one glyph from me01-171 (same expansion), so it does not back a lone answer."""
    similar = {"me01-121": 0.991, "me01-171": 0.99, "me02.5-193": 0.98, "sv01-25": 0.6}
    decision = decide(similar, read("121/132", "MEG"), GROUPS)
    assert [m[0] for m in decision.matches] == ["me01-121", "me01-171"]
    assert decision.details["near_siblings"] == ["me01-171"]
    # Footer odds that single out the read card do back it: answered alone.
    backed = dataclasses.replace(
        read("121/132", "MEG"),
        footer_scores={"MEG 121/132": -0.5, "MEG 171/132": -8.0, "ASC 193/217": -9.0},
    )
    assert decide(similar, backed, GROUPS).matches == [("me01-121", 0.991)]
    # A print with no sibling one glyph away still names its card alone (193 is two glyphs from 121/171).
    assert decide(similar, read("193/217", "ASC"), GROUPS).matches == [("me02.5-193", 0.98)]


def _random_read(rng: random.Random, table: PrintTable, near: list[str]) -> Read:
    """A read as the reader might give it: fields of a card the picture also saw, of any card, or
    garbage, each at a confidence either side of the floor, and footer scores for a few lines."""
    cards = list(table.cards.values())
    source = table.cards[rng.choice(near)] if near and rng.random() < 0.6 else rng.choice(cards)

    def field(value: str | None) -> tuple[str | None, float]:
        roll = rng.random()
        if roll < 0.3 or value is None:
            return None, 0.0
        if roll < 0.45:
            value = rng.choice(["999", "ZZZ", "1", value[:-1] or "7", value + "1"])
        return value, rng.choice([0.2, 0.69, 0.7, 0.95])

    name, name_conf = field(source.name if rng.random() < 0.8 else rng.choice(cards).name)
    number, number_conf = field(source.number)
    code, code_conf = field(source.set_code)
    total = source.printed_total if rng.random() < 0.3 else None
    footers = {rng.choice(cards).footer: -rng.uniform(0.1, 60.0) for _ in range(rng.randint(0, 4))}
    return Read(name, name_conf, number, number_conf, total, code, code_conf, footers)


def test_no_read_changes_a_picture_answer():
    """`picture_answer` lets the scanner skip the Reader (a fifth of a scan's CPU). Where it answers, no
    read may change `decide`'s answer (matches, scores, reason), and it must be that answer. Tried on
    random similarities at the thresholds' edges and adversarial reads over both hand-made tables: a
    read naming another card, a look-alike, a misread number, garbage, footer lines of any card."""
    rng = random.Random(12)
    skipped = kept = 0
    # The shipped thresholds, and a lone answer allowed below `accept_with_print` (a Serve config may).
    for table, t in itertools.product((TABLE, GROUPS), (Thresholds(), Thresholds(accept_alone=0.75))):
        ids = sorted(table.cards)
        for _ in range(3000):
            similar = {cid: rng.uniform(0.3, 0.99) for cid in rng.sample(ids, rng.randint(1, len(ids)))}
            if rng.random() < 0.5:  # a sure picture: one card well ahead, at the thresholds' edges
                top = rng.choice(sorted(similar))
                similar[top] = rng.choice([0.76, 0.81, 0.82, 0.849, 0.85, 0.9, 0.949, 0.95, 0.97, 0.99])
                gap = rng.choice([0.0, 0.029, 0.03, 0.049, 0.05, 0.051, 0.2])
                for cid in similar:
                    if cid != top and table.cards[cid].artwork != table.cards[top].artwork:
                        similar[cid] = min(similar[cid], similar[top] - gap)
            unread = picture_answer(similar, table, t)
            if unread is None:
                kept += 1
                continue
            skipped += 1
            assert len(unread.matches) == 1 and unread.reason is None, similar
            alone = decide(similar, None, table, t)
            assert (alone.matches, alone.reason) == (unread.matches, unread.reason), similar
            near = sorted(similar, key=similar.__getitem__, reverse=True)[:3]
            for _ in range(20):
                reading = _random_read(rng, table, near)
                decision = decide(similar, reading, table, t)
                assert (decision.matches, decision.reason) == (unread.matches, unread.reason), (
                    similar,
                    reading,
                )
    assert skipped > 1000 and kept > 1000, (skipped, kept)


def test_the_print_is_read_for_reprints_and_for_a_picture_short_of_a_lone_answer():
    """The reprints of one artwork are told apart only by their print, however sure the picture is; a
    unique artwork needs it where the picture alone would not answer it alone (the print may name it, or
    another card)."""
    assert picture_answer({"base1-4": 0.99, "base1-2": 0.5}, TABLE) is None  # Charizard has a reprint
    assert picture_answer({"base1-2": 0.97, "base1-15": 0.80}, TABLE) is not None
    assert picture_answer({"base1-2": 0.86, "base1-15": 0.80}, TABLE) is None  # a race with nothing read
    assert picture_answer({"base1-2": 0.84, "base1-15": 0.60}, TABLE) is None  # below accept
    assert picture_answer({"base1-2": 0.90, "base1-15": 0.88}, TABLE) is None  # a race
    assert picture_answer({}, TABLE) is None and picture_answer({"not-indexed": 0.99}, TABLE) is None
    # ...and a read does change those: it names the other reprint, or the card the race left second.
    assert decide({"base1-4": 0.99, "base4-4": 0.98}, read("4", "B2"), TABLE).matches[0][0] == "base4-4"
    raced = decide({"base1-2": 0.90, "base1-15": 0.88}, read("15", "BS"), TABLE)
    assert raced.matches == [("base1-15", 0.88)]
    # A picture short of a lone answer can have one with the print (`accept_with_print`).
    short = decide({"base1-2": 0.84, "base1-15": 0.60}, read("2", "BS"), TABLE)
    assert short.matches == [("base1-2", 0.84)]


# Issue #43: fusion by the contract when the print is unreadable (spec, Scan, rules 2 and 4).
HELDOUT_MISSES = PrintTable(
    [
        CardPrint("xy11-25", "Volcanion", "25", "STS", "114", "Volcanion|5ban"),
        CardPrint("2019sm-fr-11", "Ponyta", "11", None, None, "Ponyta|Other"),
        CardPrint("g1-3", "Venusaur EX", "3", "GEN", "83", "Venusaur EX|Eske"),
    ]
)


def test_an_unreadable_print_and_a_close_reprinted_artwork_race_its_reprints_best_first():
    """#43's 18 hard shared-artwork photos answered `print_unreadable`: nothing legible, the picture's
    best (a Lycanroc reprint) under a73d9a9's bound, and a look-alike 0.01 behind it (under its 0.03
    margin for a sure artwork). Closer than photos with no card get (`close_similarity`), the artwork's
    reprints race: five of its seven, the two the search returned first, all at the artwork's
    similarity; the look-alike does not fit."""
    similar = {"sm2-138": 0.82, "sm2-74": 0.819, "sv01-25": 0.81, "sv02-30": 0.60}
    decision = decide(similar, Read(), GROUPS)
    assert decision.reason is None
    assert [m[0] for m in decision.matches] == ["sm2-138", "sm2-74", "sm2-156", "sm3-136", "sm3-155"]
    assert {score for _, score in decision.matches} == {0.82}
    assert decision.details["race_artwork"] == "Lycanroc GX|5ban"
    # A group that fits leaves room for the look-alike within the race window, after the reprints.
    decision = decide({"me01-171": 0.82, "sv01-25": 0.81}, Read(), GROUPS)
    assert [m[0] for m in decision.matches] == ["me01-171", "me01-121", "me02.5-193", "sv01-25"]


def test_print_unreadable_exactly_when_nothing_is_as_close_as_photos_without_a_card_get():
    """`print_unreadable` is for a photo where nothing looked close: the best card under
    `close_similarity` (what no-card validation photos reach), whatever the margin; at or above it
    something did, and it is answered (a73d9a9 drew the line at 0.80, or 0.78 with a 0.03 margin)."""
    close = Thresholds().close_similarity
    for table, best, other in (
        (GROUPS, "me01-171", "sv01-25"),  # a reprinted artwork
        (TABLE, "base1-2", "base1-15"),  # a unique one
    ):
        below = decide({best: close - 0.005, other: 0.5}, Read(), table)
        assert below.matches == [] and below.reason == "print_unreadable", table
        above = decide({best: close + 0.005, other: close}, Read(), table)
        assert above.reason is None and above.matches[0] == (best, close + 0.005), table
        assert 2 <= len(above.matches) <= 5
    # Chosen on validation photos (fusion_sweep --grid close): 0.78 with cardnet-v3, 0.80 with cardnet-v6.
    assert close == 0.80


def test_no_lone_answer_on_a_picture_score_with_nothing_read():
    """#43's confident wrong answers: xy11-25 (Volcanion) answered alone as 2019sm-fr-11, a card of
    another artwork, at 0.862 with nothing read (a73d9a9's `accept_alone` 0.85). Without the print a lone
    answer needs a unique artwork the picture is sure of (`accept` 0.95, `margin` 0.03): this is a race.
    And a reprinted artwork is never answered alone on the picture, however close: the search returned one
    of the three Mega Signals at 0.979, and a73d9a9 answered it alone."""
    decision = decide({"2019sm-fr-11": 0.862, "xy11-25": 0.80, "g1-3": 0.7}, Read(), HELDOUT_MISSES)
    assert [m[0] for m in decision.matches] == ["2019sm-fr-11", "xy11-25"]
    decision = decide({"2019sm-fr-11": 0.862, "g1-3": 0.6}, Read(), HELDOUT_MISSES)
    assert len(decision.matches) != 1 and decision.matches[0][0] == "2019sm-fr-11"
    decision = decide({"me01-171": 0.979, "sv01-25": 0.70}, Read(), GROUPS)
    assert sorted(m[0] for m in decision.matches) == ["me01-121", "me01-171", "me02.5-193"]
    # The print backs a lone answer; so does a sure picture of a unique artwork.
    assert decide({"xy11-25": 0.862, "g1-3": 0.6}, read("25/114", "STS"), HELDOUT_MISSES).matches == [
        ("xy11-25", 0.862)
    ]
    assert decide({"xy11-25": 0.96, "g1-3": 0.6}, Read(), HELDOUT_MISSES).matches == [("xy11-25", 0.96)]


def test_confidence_tiers_follow_what_backs_the_answer():
    """`certain`: one card the print backs at `certain_with_print`, or a unique artwork the picture alone
    is sure of at `certain_picture`; `likely`: any other lone answer; `review`: a race or nothing."""
    t = Thresholds(certain_with_print=0.9, certain_picture=0.97)
    backed = decide({"base1-4": 0.93, "base4-4": 0.94}, read("004/102", "BS"), TABLE, t)
    assert backed.matches == [("base1-4", 0.93)] and backed.tier == "certain"
    assert backed.details["basis"] == "print"
    faint = decide({"base1-4": 0.86, "base4-4": 0.87}, read("004/102", "BS"), TABLE, t)
    assert faint.matches == [("base1-4", 0.86)] and faint.tier == "likely"
    sure = decide({"base1-2": 0.98, "base1-15": 0.80}, None, TABLE, t)
    assert sure.matches == [("base1-2", 0.98)] and sure.tier == "certain"
    short = decide({"base1-2": 0.96, "base1-15": 0.80}, None, TABLE, t)
    assert short.matches == [("base1-2", 0.96)] and short.tier == "likely"
    race = decide({"base1-4": 0.96, "base4-4": 0.97}, read(), TABLE, t)
    assert len(race.matches) == 2 and race.tier == "review"
    nothing = decide({"base1-2": 0.5}, None, TABLE, t)
    assert nothing.matches == [] and nothing.tier == "review"
    assert picture_answer({"base1-2": 0.98, "base1-15": 0.80}, TABLE, t).tier == "certain"  # type: ignore[union-attr]
    assert decide({"base1-2": 0.98}, None, TABLE, t).as_dict()["tier"] == "certain"


def test_a_sure_picture_over_a_print_naming_another_card_is_never_certain():
    """The print and the picture disagreed: the picture's card stands (the print was misread), but a
    disagreement is not what `certain` promises."""
    t = Thresholds(certain_with_print=0.9, certain_picture=0.97)
    decision = decide({"base1-2": 0.99, "base1-15": 0.70}, read("015/102", "BS"), TABLE, t)
    assert decision.matches == [("base1-2", 0.99)] and decision.tier == "likely"


def test_the_footer_answers_alone_only_a_reprint_the_picture_has_not_ruled_out():
    """Validation photo 21,000,160 (sm7-181, a gold reprint of sm7-140's artwork): the picture found the
    photo's print and left the other outside its nearest, the footer's odds named the other: it was
    answered alone, wrong. A reprint the search put outside the race window differs in frame or finish,
    so the footer no longer answers it alone: the two race, the picture's first."""
    legible = Read(footer_scores=footers(base1_4=-2.0, base4_4=-17.0))  # the footer names base1-4
    both = decide({"base1-4": 0.96, "base4-4": 0.97}, legible, TABLE)
    assert both.matches == [("base1-4", 0.97)] and both.details["basis"] == "footer"
    ruled_out = decide({"base4-4": 0.96, "base1-2": 0.70}, legible, TABLE)
    assert [m[0] for m in ruled_out.matches] == ["base4-4", "base1-4"] and ruled_out.tier == "review"
