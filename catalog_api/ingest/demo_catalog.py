"""A small synthetic catalog in the upstream feed format, for clones without `../shared`.

Everything here is invented (creatures, illustrators, sets, ids, texts), because the project must
never copy the real feed into its repository. It still carries the real feed's quirks (cards with
no English name, rarity "None", letter and zero-padded collector numbers, a duplicated printing, an
empty variant list, reprints sharing name and illustrator, ...) so the demo server and the tests go
through the same loader paths as a real sync. Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path
from typing import Any

from catalog_api.ingest.demo_cards import ENERGIES, RESISTS, SPECIES, TRAINERS, WEAK_TO, Species

Record = dict[str, Any]

_SEED = 20010310
_ASSETS = "https://assets.example"
_MARKET = "https://marketplace.example/p"


class _Builder:
    """Turns short card specs into full feed records; one instance per catalog, so ids are stable."""

    def __init__(self) -> None:
        self.rng = random.Random(_SEED)
        self.next_market_id = 7_100_001

    def market_id(self) -> int:
        self.next_market_id += 1
        return self.next_market_id - 1

    def printing(
        self, kind: str, *, subtype: str | None = None, size: str | None = None,
        stamps: tuple[str, ...] = (), foil: str | None = None, ids: bool = False,
    ) -> Record:  # fmt: skip
        """One printing; `ids` adds upstream marketplace ids, as the real feed has where known."""
        variant: Record = dict(type=kind, subtype=subtype, size=size, stamps=list(stamps), foil=foil)
        if ids:
            variant["tcgplayer_product_id"] = self.market_id()
            variant["cardmarket_product_id"] = self.market_id()
        return variant

    def variants(self, style: str) -> tuple[list[Record], str]:
        """Printing lists by style, as (variants, variants_source)."""
        p = self.printing
        match style:
            case "vintage":
                return [p("normal", ids=True), p("normal", stamps=("1st-edition",), ids=True)], "detailed"
            case "vintage-holo":
                return [
                    p("holo", subtype="unlimited", ids=True),
                    p("holo", subtype="shadowless", stamps=("1st-edition",), ids=True),
                    p("normal", size="jumbo"),
                ], "detailed"
            case "modern":
                return [p("normal", ids=True), p("reverse", ids=True)], "detailed"
            case "modern-holo":
                return [p("holo", ids=True), p("reverse", ids=True), p("holo", foil="cosmos")], "detailed"
            case "holo-only":
                return [p("holo")], "flags"
            case "promo":
                return [p("holo", ids=True), p("holo", stamps=("w-promo",))], "detailed"
            case "duplicate":
                # The source lists the same printing twice; the loader must not lose or double it.
                twice = [p("normal", stamps=("pre-release",)) for _ in range(2)]
                return [p("normal"), *twice], "detailed"
            case "empty":
                return [], "flags"
            case "absent":
                return [p("normal")], "absent"
        raise ValueError(f"unknown variant style {style!r}")

    def card(
        self, expansion: Record, number: str, key: str, rarity: str, illustrator: str | None, style: str,
        **overrides: Any,
    ) -> Record:  # fmt: skip
        """A full card record; `key` names a species, trainer or energy, `overrides` replace fields."""
        variants, source = self.variants(style)
        record: Record = {
            "id": f"{expansion['id']}-{number}",
            "expansion_id": expansion["id"],
            "series_id": expansion["series_id"],
            "number": number,
            "name": key,
            "names": {},
            "category": "",
            "subtypes": [],
            "stage": None,
            "suffix": None,
            "trainer_type": None,
            "energy_type": None,
            "rarity": rarity,
            "illustrator": illustrator,
            "hp": None,
            "types": None,
            "dex_numbers": None,
            "evolve_from": None,
            "level": None,
            "description": None,
            "effect": None,
            "item": None,
            "abilities": [],
            "attacks": [],
            "weaknesses": [],
            "resistances": [],
            "retreat": None,
            "regulation_mark": expansion["_regulation_mark"],
            "legality": dict(expansion["_legality"]),
            "variants": variants,
            "variants_source": source,
            "printings": {},
        }
        if key in SPECIES:
            record.update(self.pokemon_fields(SPECIES[key]))
        elif key in TRAINERS:
            trainer_type, fr, effect = TRAINERS[key]
            record.update(
                names={"en": key, "fr": fr}, category="Trainer", subtypes=[trainer_type],
                trainer_type=trainer_type, effect=effect,
            )  # fmt: skip
        else:
            energy_type, energy_fr, energy_effect = ENERGIES[key]
            basic = energy_type == "Normal"
            record.update(
                names={"en": key, "fr": energy_fr}, category="Energy", energy_type=energy_type,
                effect=energy_effect,
                subtypes=["Basic", "Normal"] if basic else ["Special"], stage="Basic" if basic else None,
            )  # fmt: skip
            if basic:  # basic Energy stays legal everywhere, as in the real feed
                record["legality"] = {"standard": True, "expanded": True}
        record.update(overrides)
        record["printings"] = _printings(record["variants"])
        return record

    def pokemon_fields(self, s: Species) -> Record:
        """Stats scale with stage; the rng only fills numbers nobody tests on."""
        rng = self.rng
        tier = {"Basic": 0, "Stage1": 1, "Stage2": 2}[s.stage]
        base = 10 * (2 + 2 * tier + rng.randint(0, 2))
        attacks = [
            {"name": s.moves[0], "cost": [s.type], "damage": str(base), "text": None},
            {
                "name": s.moves[1],
                "cost": [s.type] + ["Colorless"] * (tier + 1),
                "damage": str(base + 10 * (tier + 2)),
                "text": None,
            },
        ]
        return {
            "names": {"en": s.name, "fr": s.fr, "de": s.de},
            "category": "Pokemon",
            "subtypes": [s.stage],
            "stage": s.stage,
            "hp": 10 * (5 + 3 * tier + rng.randint(0, 2)),
            "types": [s.type],
            "dex_numbers": [s.dex],
            "evolve_from": s.evolve_from,
            "description": s.flavour,
            "attacks": attacks,
            "weaknesses": [{"type": WEAK_TO[s.type], "modifier": "×2"}],
            "resistances": [{"type": RESISTS[s.type], "modifier": "-30"}] if s.type in RESISTS else [],
            "retreat": tier + 1,
        }


def _printings(variants: list[Record]) -> Record:
    """The coarse printing flags, derived from the variant list the way the real feed derives them."""
    return {
        "normal": any(v["type"] == "normal" for v in variants),
        "holo": any(v["type"] == "holo" for v in variants),
        "reverse": any(v["type"] == "reverse" for v in variants),
        "first_edition": any("1st-edition" in v["stamps"] for v in variants),
        "w_promo": any("w-promo" in v["stamps"] for v in variants),
    }


def _attack(name: str, cost: list[str], damage: str | None, text: str | None) -> Record:
    return {"name": name, "cost": cost, "damage": damage, "text": text}


def _series() -> list[Record]:
    return [
        {
            "id": "emb",
            "name": "Emberdawn",
            "names": {"en": "Emberdawn", "fr": "Aube de Braise", "de": "Glutdämmerung"},
            "first_release_date": "2001-03-10",
        },
        {
            "id": "tdw",
            "name": "Tidewater",
            "names": {"en": "Tidewater", "fr": "Marée Haute", "de": "Gezeitenwasser"},
            "first_release_date": "2015-06-05",
        },
    ]


def _expansion(
    id_: str, series_id: str, name: str, fr: str, release: str, official: int, code: str | None,
    group_id: int | None, cardmarket_id: int | None, legality: tuple[bool, bool], regulation_mark: str | None,
) -> Record:  # fmt: skip
    """An expansion record; keys starting with `_` are build-time defaults for its cards, dropped on write."""
    return {
        "id": id_,
        "series_id": series_id,
        "name": name,
        "names": {"en": name, "fr": fr},
        "release_date": release,
        "card_count_total": official,
        "card_count_official": official,
        "legal_standard": False,
        "legal_expanded": False,
        "standard_legal_cards": 0,
        "expanded_legal_cards": 0,
        "ptcgo_code": code,
        "abbreviation": code,
        "abbreviations": {"official": code} if code else None,
        "tcgplayer_group_id": group_id,
        "cardmarket_expansion_id": cardmarket_id,
        "cardtrader_id": None,
        "logo_url": f"{_ASSETS}/en/{series_id}/{id_}/logo",
        "symbol_url": f"{_ASSETS}/univ/{series_id}/{id_}/symbol",
        "code": code,
        "_legality": {"standard": legality[0], "expanded": legality[1]},
        "_regulation_mark": regulation_mark,
    }


def _build() -> tuple[list[Record], list[Record], list[Record], list[Record]]:
    """The whole catalog as (series, expansions, cards, products)."""
    b = _Builder()
    emb1 = _expansion("emb1", "emb", "Emberdawn Base", "Aube de Braise", "2001-03-10", 22, "EMB", 91001,
                      81001, (False, True), None)  # fmt: skip
    # The promo set has no printed set code: the card face shows a set symbol instead.
    embp = _expansion("embp", "emb", "Emberdawn Promos", "Promos Aube de Braise", "2001-09-01", 10, None,
                      91002, None, (False, False), None)  # fmt: skip
    tdw1 = _expansion("tdw1", "tdw", "Tidewater Rising", "Marée Montante", "2015-06-05", 22, "TDW", 91003,
                      81003, (True, True), "H")  # fmt: skip

    mara, tetsu, olek, juniper = "Mara Quillon", "Tetsu Hanabira", "Olek Brandt", "Juniper Vale"
    sana, ines, castel, pim = "Sana Moriwake", "Ines Florette", "R. Castellane", "Pim Okonkwo-Hale"
    c = b.card
    cards = [
        # Emberdawn Base: plain numbers 1..22 (so "2" must sort before "10") plus one "RC" subset card.
        c(emb1, "1", "Sproutle", "Common", juniper, "vintage"),
        c(emb1, "2", "Thornmane", "Uncommon", juniper, "vintage"),
        c(emb1, "3", "Embercub", "Common", mara, "vintage"),
        c(emb1, "4", "Emberlynx", "Uncommon", mara, "vintage",
          abilities=[{"kind": "Poke-POWER", "name": "Kindle", "text": "Once during your turn, you may attach "
                      "a Fire Energy card from your discard pile to this Pokémon."}]),
        c(emb1, "5", "Pyrolynx", "Holo Rare", castel, "vintage-holo"),
        c(emb1, "6", "Tidalynx", "Common", sana, "vintage"),
        c(emb1, "7", "Tidalord", "Rare", sana, "vintage-holo"),
        c(emb1, "8", "Sparkit", "Common", tetsu, "vintage",
          attacks=[_attack("Static Hop", ["Lightning"], "20×", "Flip 2 coins. This attack does 20 damage "
                           "times the number of heads.")]),
        c(emb1, "9", "Voltalon", "Uncommon", tetsu, "vintage"),
        c(emb1, "10", "Pebblet", "Common", olek, "vintage"),
        c(emb1, "11", "Boulderox", "Uncommon", olek, "vintage",
          attacks=[_attack("Quarry Ram", ["Fighting", "Colorless"], "30+", "Flip a coin. If heads, this "
                           "attack does 30 more damage.")]),
        c(emb1, "12", "Gloomoth", "Rare", ines, "vintage-holo",
          abilities=[{"kind": "Poke-BODY", "name": "Drowsy Scales", "text": "As long as this Pokémon is your "
                      "Active Pokémon, your opponent's Active Pokémon can't retreat."}],
          item={"name": "Glimmer Charm", "text": "Prevent all effects of attacks done to this Pokémon."}),
        c(emb1, "13", "Mistfawn", "Common", ines, "vintage"),
        c(emb1, "14", "Gustwing", "Common", pim, "vintage"),
        c(emb1, "15", "Cinderpup", "Common", pim, "vintage",
          weaknesses=[{"type": "Water", "modifier": "x2"}]),
        c(emb1, "16", "Field Notes", "Uncommon", olek, "vintage"),
        c(emb1, "17", "Lantern Rod", "Common", juniper, "vintage"),
        c(emb1, "18", "Cozy Scarf", "Uncommon", sana, "vintage"),
        c(emb1, "19", "Lighthouse Quay", "Uncommon", castel, "vintage"),
        c(emb1, "20", "Fire Energy", "Common", None, "vintage"),
        c(emb1, "21", "Water Energy", "Common", None, "vintage"),
        c(emb1, "22", "Prism Surge Energy", "Uncommon", castel, "vintage"),
        c(emb1, "RC12", "Sparkit", "Rare", ines, "holo-only"),
        # Emberdawn Promos (no set code): letters, "!", "77a", "SV001", and the feed's untidy records.
        c(embp, "1", "Mistfawn", "None", ines, "promo", name=None, names={"fr": "Brumelin"}),
        c(embp, "2", "Frostling", "None", sana, "promo", name=None, names={"fr": "Givrelin"}),
        c(embp, "3", "Duskfang", "None", None, "promo"),
        c(embp, "10", "Embercub", "Promo", pim, "promo"),
        c(embp, "11", "Ironshell", "Promo", olek, "empty"),
        c(embp, "12", "Gustwing", "Promo", pim, "duplicate"),
        c(embp, "A", "Gloomoth", "Promo", castel, "holo-only"),
        c(embp, "!", "Gloomoth", "Promo", castel, "holo-only"),
        c(embp, "77a", "Boulderox", "Promo", olek, "holo-only"),
        c(embp, "SV001", "Sparkit", "Promo", tetsu, "promo"),
        # Tidewater Rising: zero-padded numbers 001..025 (022 official, then secret rares) and a "TG" card.
        c(tdw1, "001", "Sproutle", "Common", pim, "modern"),
        c(tdw1, "002", "Thornmane", "Double rare", pim, "modern-holo", name="Thornmane ex",
          names={"en": "Thornmane ex", "fr": "Épinière-ex", "de": "Dornmähne-ex"}, subtypes=["Stage1", "ex"],
          suffix="ex", hp=250, description=None),
        c(tdw1, "003", "Embercub", "Common", mara, "modern"),
        c(tdw1, "004", "Emberlynx", "Uncommon", mara, "modern"),
        c(tdw1, "005", "Pyrolynx", "Rare", castel, "modern-holo",
          abilities=[{"kind": "Ability", "name": "Heat Haze", "text": "If this Pokémon would be Knocked Out "
                      "by damage from an attack, flip a coin. If heads, it is not Knocked Out."}]),
        c(tdw1, "006", "Cinderpup", "Common", juniper, "modern"),
        c(tdw1, "007", "Tidalynx", "Common", sana, "modern"),
        c(tdw1, "008", "Tidalord", "Rare", sana, "modern-holo",
          abilities=[{"kind": "Ability", "name": "Tidal Call", "text": "Once during your turn, you may "
                      "search your deck for a Water Energy card and attach it to this Pokémon."}]),
        c(tdw1, "009", "Frostling", "Common", juniper, "modern",
          attacks=[_attack("Icy Breath", ["Water"], None, "Your opponent's Active Pokémon is now Asleep.")]),
        c(tdw1, "010", "Sparkit", "Common", ines, "modern"),
        c(tdw1, "011", "Voltalon", "Uncommon", tetsu, "modern"),
        c(tdw1, "012", "Pebblet", "Common", olek, "absent"),
        c(tdw1, "013", "Boulderox", "Uncommon", olek, "absent",
          weaknesses=[{"type": "Grass", "modifier": "+20"}]),
        c(tdw1, "014", "Gloomoth", "Common", castel, "absent"),
        c(tdw1, "015", "Mistfawn", "Common", ines, "modern"),
        c(tdw1, "016", "Duskfang", "Uncommon", pim, "modern"),
        c(tdw1, "017", "Ironshell", "Common", olek, "modern",
          resistances=[{"type": "Grass", "modifier": "-20"}]),
        c(tdw1, "018", "Gustwing", "Common", pim, "modern"),
        c(tdw1, "019", "Field Notes", "Uncommon", olek, "modern"),
        c(tdw1, "020", "Ranger Mirelle", "Uncommon", juniper, "modern"),
        c(tdw1, "021", "Lantern Rod", "Common", mara, "modern", regulation_mark="G",
          legality={"standard": False, "expanded": True}),
        c(tdw1, "022", "Lighthouse Quay", "Uncommon", castel, "modern"),
        c(tdw1, "023", "Tidalord", "Ultra Rare", tetsu, "holo-only"),
        c(tdw1, "024", "Ranger Mirelle", "Ultra Rare", mara, "holo-only"),
        c(tdw1, "025", "Pyrolynx", "Secret Rare", None, "holo-only"),
        c(tdw1, "TG05", "Sparkit", "Illustration rare", sana, "holo-only"),
    ]  # fmt: skip

    expansions = [emb1, embp, tdw1]
    for exp in expansions:
        own = [card for card in cards if card["expansion_id"] == exp["id"]]
        exp["card_count_total"] = max(exp["card_count_official"], len(own))
        # As upstream: basic Energy (legal everywhere) does not make a set legal nor count towards it.
        counted = [card for card in own if card["energy_type"] != "Normal"]
        exp["standard_legal_cards"] = sum(card["legality"]["standard"] for card in counted)
        exp["expanded_legal_cards"] = sum(card["legality"]["expanded"] for card in counted)
        exp["legal_standard"] = exp["standard_legal_cards"] > 0
        exp["legal_expanded"] = exp["_legality"]["expanded"] or exp["expanded_legal_cards"] > 0

    def product(n: int, name: str, exps: list[Record], msrp: int, number: str | None = None) -> Record:
        id_ = 900_000 + n
        return {
            "id": id_,
            "name": name,
            "clean_name": " ".join(name.replace("&", " ").split()),
            "number": number,
            "image": None,
            "marketplace_url": f"{_MARKET}/{id_}",
            "expansions": [{"id": e["id"], "name": e["name"]} for e in exps],
            "msrp_cents": msrp,
        }

    products = [
        product(1, "Emberdawn Base Booster Pack", [emb1], 449),
        product(2, "Emberdawn Base Booster Box", [emb1], 14399),
        product(3, "Tidewater Rising Booster Pack", [tdw1], 449),
        product(4, "Tidewater Rising Elite Trainer Box", [tdw1], 4999),
        product(5, "Emberdawn & Tidewater Premium Collection", [emb1, tdw1], 3999),
        product(6, "Emberdawn Promos Sparkit Blister", [embp], 599, number="SV001"),
    ]
    public = [{k: v for k, v in exp.items() if not k.startswith("_")} for exp in expansions]
    return _series(), public, cards, products


def _write_jsonl_gz(path: Path, records: list[Record]) -> None:
    """Compact JSON, UTF-8, gzip with mtime 0 and no file name, so reruns give identical bytes."""
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    path.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))


def write_demo_catalog(out_dir: Path) -> Path:
    """Writes series.jsonl.gz, expansions.jsonl.gz, cards.jsonl.gz, products.jsonl.gz into out_dir
    (created if needed); returns out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    series, expansions, cards, products = _build()
    for name, records in [
        ("series", series),
        ("expansions", expansions),
        ("cards", cards),
        ("products", products),
    ]:
        _write_jsonl_gz(out_dir / f"{name}.jsonl.gz", records)
    return out_dir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the synthetic demo catalog feed.")
    parser.add_argument("out_dir", type=Path, help="folder to write the four .jsonl.gz files into")
    args = parser.parse_args(argv)
    print(write_demo_catalog(args.out_dir))


if __name__ == "__main__":
    main()
