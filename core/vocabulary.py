"""Words of the domain that several rooms use: the game's name and the order of card conditions.

`CONDITION_ORDER` sat in the price ingester, so the read model, the repository, the outbox and the
snapshot files all imported `prices`, which imported them back: a five-module circle. Down here it is
a leaf."""

from __future__ import annotations

# The one game this catalog serves: event names are `cardgame.<name>`, scans answer `analysis.game`.
GAME = "cardgame"
# Best condition first; prices and variants are listed in this order (unknown conditions last).
CONDITION_ORDER = {"NM": 0, "LP": 1, "MP": 2, "HP": 3, "DMG": 4}
