"""The invented cards of the demo catalog (`demo_catalog.py` builds feed records from them).

Creatures, trainers and energies with their French and German names, types, evolutions and moves: the
sample's content, kept apart from the builder so each reads on its own. Nothing here is copied from the
real feed.
"""

from __future__ import annotations

from dataclasses import dataclass

# Game vocabulary (types, weakness pairs) is shared with the real game; the creatures are not.
WEAK_TO = {
    "Fire": "Water",
    "Water": "Lightning",
    "Grass": "Fire",
    "Lightning": "Fighting",
    "Fighting": "Psychic",
    "Psychic": "Darkness",
    "Colorless": "Fighting",
    "Metal": "Fire",
    "Darkness": "Grass",
}
RESISTS = {"Fighting": "Lightning", "Metal": "Grass", "Darkness": "Psychic", "Colorless": "Fighting"}


@dataclass(frozen=True)
class Species:
    name: str
    fr: str
    de: str
    type: str
    stage: str
    evolve_from: str | None
    dex: int
    flavour: str
    moves: tuple[str, str]


SPECIES = {
    s.name: s
    for s in [
        Species(
            "Embercub", "Braisourson", "Glutbärchen", "Fire", "Basic", None, 2001,
            "It sleeps curled around a warm pebble and sneezes sparks when it wakes.",
            ("Ember Nip", "Warm Tumble"),
        ),
        Species(
            "Emberlynx", "Braislynx", "Glutluchs", "Fire", "Stage1", "Embercub", 2002,
            "Its tufted ears glow brighter the closer it gets to its prey.",
            ("Cinder Pounce", "Kiln Claw"),
        ),
        Species(
            "Pyrolynx", "Pyrolynx", "Pyroluchs", "Fire", "Stage2", "Emberlynx", 2003,
            "A single flick of its tail can light every lantern in a valley.",
            ("Blaze Mantle", "Furnace Leap"),
        ),
        Species(
            "Tidalynx", "Marélynx", "Flutluchs", "Water", "Basic", None, 2004,
            "It waits at the tide line and pounces on shells the waves leave behind.",
            ("Splash Swipe", "Brine Spin"),
        ),
        Species(
            "Tidalord", "Maréseigneur", "Flutfürst", "Water", "Stage1", "Tidalynx", 2005,
            "Sailors say the sea calms when it raises its crested head.",
            ("Undertow", "Rising Surge"),
        ),
        Species(
            "Sproutle", "Pousselin", "Sprössling", "Grass", "Basic", None, 2006,
            "It buries itself up to the leaves on sunny days to drink the light.",
            ("Seed Toss", "Leaf Flutter"),
        ),
        Species(
            "Thornmane", "Épinière", "Dornmähne", "Grass", "Stage1", "Sproutle", 2007,
            "Its mane of brambles blooms once a year, all on the same night.",
            ("Bramble Lash", "Thicket Charge"),
        ),
        Species(
            "Sparkit", "Étincelot", "Funkel", "Lightning", "Basic", None, 2008,
            "Packs of them gather under power lines and hum together at dusk.",
            ("Static Hop", "Zap Bolt"),
        ),
        Species(
            "Voltalon", "Voltalon", "Voltalon", "Lightning", "Stage1", "Sparkit", 2009,
            "Its talons crackle so loudly that storms seem to follow it.",
            ("Arc Talon", "Thunder Dive"),
        ),
        Species(
            "Pebblet", "Galetin", "Kieselchen", "Fighting", "Basic", None, 2010,
            "It rolls downhill on purpose and climbs back up to do it again.",
            ("Pebble Bump", "Rockslide Roll"),
        ),
        Species(
            "Boulderox", "Rocheboeuf", "Felsochse", "Fighting", "Stage1", "Pebblet", 2011,
            "Its horns are worn smooth from pushing boulders out of rivers.",
            ("Quarry Ram", "Stone Stampede"),
        ),
        Species(
            "Gloomoth", "Sombrephale", "Düstermotte", "Psychic", "Basic", None, 2012,
            "The dust on its wings shows whoever breathes it a long-forgotten dream.",
            ("Dream Dust", "Moonlit Flicker"),
        ),
        Species(
            "Mistfawn", "Brumelin", "Nebelkitz", "Psychic", "Basic", None, 2013,
            "It walks only in fog and leaves no hoofprints behind.",
            ("Haze Step", "Fog Veil"),
        ),
        Species(
            "Frostling", "Givrelin", "Frostling", "Water", "Basic", None, 2014,
            "It paints frost patterns on windows to signal to its friends.",
            ("Icy Breath", "Rime Rush"),
        ),
        Species(
            "Cinderpup", "Cendrechiot", "Aschewelpe", "Fire", "Basic", None, 2015,
            "It naps in cooling ashes and wags its smoking tail at visitors.",
            ("Ash Yip", "Smoulder Bite"),
        ),
        Species(
            "Gustwing", "Rafalaile", "Böenflügel", "Colorless", "Basic", None, 2016,
            "It rides the first gust of every storm across the whole sky.",
            ("Wing Gust", "Updraft"),
        ),
        Species(
            "Ironshell", "Ferrocarapace", "Eisenpanzer", "Metal", "Basic", None, 2017,
            "Its shell rings like a bell when rain falls on it.",
            ("Shell Knock", "Iron Roll"),
        ),
        Species(
            "Duskfang", "Crocrépuscule", "Dämmerzahn", "Darkness", "Basic", None, 2018,
            "It hunts only in the minute between sunset and nightfall.",
            ("Shadow Snap", "Twilight Fang"),
        ),
    ]
}  # fmt: skip

# Trainer cards: name -> (trainer_type, French name, effect).
TRAINERS = {
    "Field Notes": ("Supporter", "Carnet de terrain", "Draw 3 cards. Then, put a card from your hand on the "
                    "bottom of your deck."),
    "Ranger Mirelle": ("Supporter", "Garde Mirelle", "Search your deck for up to 2 Basic Pokémon and put "
                       "them onto your Bench. Then, shuffle your deck."),
    "Lantern Rod": ("Item", "Canne-lanterne", "Look at the top 4 cards of your deck and put 1 of them into "
                    "your hand. Shuffle the other cards back into your deck."),
    "Cozy Scarf": ("Tool", "Écharpe douillette", "The Pokémon this card is attached to gets +20 HP."),
    "Lighthouse Quay": ("Stadium", "Quai du phare", "Once during each player's turn, that player may heal "
                        "10 damage from their Active Pokémon."),
}  # fmt: skip

# Energy cards: name -> (energy_type, French name, effect).
ENERGIES = {
    "Fire Energy": ("Normal", "Énergie Feu", None),
    "Water Energy": ("Normal", "Énergie Eau", None),
    "Prism Surge Energy": ("Special", "Énergie Prisme", "This card provides {C} Energy. While attached to "
                           "an Evolution Pokémon, it provides every type of Energy but only 1 at a time."),
}  # fmt: skip
