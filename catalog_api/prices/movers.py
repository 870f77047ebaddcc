"""Price movers: how a card's headline price moved over 1, 7 and 30 days.

Definitions (docs/prices.md repeats them):
- A card's **headline printing** is the printing its displayed price is read from: the first of its
  printings, in the feed's printing order, that has a current `NM` market price. The displayed price is
  that `NM` market price. A card with no such printing has no mover row (`include=change` leaves the
  key out).
- **As-of day** `D`: the newest `observed_on` in the card price log. Window `w` starts at `D - w days`.
- `end_cents` is the headline's current `NM` market, `observed_on` the day it was observed.
- `start_cents` is the last non-null `NM` market observed on or before the window start, carried
  forward: the log only has a row on days the quote changed, so `start_as_of` is usually earlier than
  the window start. A printing with no price that old (new card, reclassified printing: its new variant
  id has no history) has no entry for that window. A market that went null is skipped over when
  carrying forward (a missing price is not a price).
- `change_cents = end - start`; `change_bp = change_cents * 10000 / start_cents` rounded half away from
  zero, computed in integers (+34.20% is 3420; 1 cent on 3 cents is 3333).
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import date, timedelta
from typing import Any

from sqlalchemy import delete, insert
from sqlalchemy.orm import Session

from catalog_api.prices.tables import CardMover

WINDOWS = {"1d": 1, "7d": 7, "30d": 30}


def basis_points(start: int, end: int) -> int:
    """(end - start) / start in basis points, rounded half away from zero, without floats."""
    change = end - start
    whole, rest = divmod(abs(change) * 10000, start)
    magnitude = whole + (1 if 2 * rest >= start else 0)
    return magnitude if change >= 0 else -magnitude


def window_entry(
    history: list[tuple[str, int]], end: tuple[str, int], as_of: str, days: int
) -> dict[str, Any] | None:
    """One Change entry from a printing's non-null NM history (ascending days), or None."""
    start_day = (date.fromisoformat(as_of) - timedelta(days=days)).isoformat()
    at = bisect_right(history, (start_day, float("inf")))
    if at == 0:
        return None
    start_as_of, start_cents = history[at - 1]
    observed_on, end_cents = end
    return {
        "start_cents": start_cents,
        "end_cents": end_cents,
        "change_cents": end_cents - start_cents,
        "change_bp": basis_points(start_cents, end_cents),
        "start_as_of": start_as_of,
        "observed_on": observed_on,
    }


def headlines(session: Session) -> dict[str, tuple[int, str, str, int, str]]:
    """card id -> (variant id, printing type, observed_on, NM market, expansion id) of its headline."""
    rows = session.connection().exec_driver_sql(
        "SELECT v.card_id, v.id, v.type, c.observed_on, c.market, k.expansion_id FROM card_variants v "
        "JOIN card_prices_current c ON c.variant_id = v.id AND c.condition = 'NM' "
        "JOIN cards k ON k.id = v.card_id "
        "WHERE c.market IS NOT NULL ORDER BY v.card_id, v.position"
    )
    found: dict[str, tuple[int, str, str, int, str]] = {}
    for card_id, variant_id, type_, observed_on, market, expansion_id in rows:
        found.setdefault(card_id, (variant_id, type_, observed_on, market, expansion_id))
    return found


def _rank(movers: list[dict[str, Any]]) -> None:
    """Leaderboard positions per window: gainers by change_bp, then change_cents, descending; losers
    by the same ascending; ties by card id. Rows that did not move that way get no rank."""
    for window in WINDOWS:
        rows = [row for row in movers if row["window"] == window]
        for row in rows:
            row["gain_rank"] = row["loss_rank"] = None
        gainers = sorted(
            (r for r in rows if r["change_bp"] > 0),
            key=lambda r: (-r["change_bp"], -r["change_cents"], r["card_id"]),
        )
        losers = sorted(
            (r for r in rows if r["change_bp"] < 0),
            key=lambda r: (r["change_bp"], r["change_cents"], r["card_id"]),
        )
        for position, row in enumerate(gainers, 1):
            row["gain_rank"] = position
        for position, row in enumerate(losers, 1):
            row["loss_rank"] = position


def recompute(session: Session, as_of: str | None) -> int:
    """Rewrite the movers table for the as-of day; returns the number of rows written."""
    session.execute(delete(CardMover))
    if as_of is None:
        return 0
    heads = headlines(session)
    wanted = {head[0] for head in heads.values()}
    history: dict[int, list[tuple[str, int]]] = {}
    rows = session.connection().exec_driver_sql(
        "SELECT variant_id, observed_on, market FROM card_prices "
        "WHERE condition = 'NM' AND market IS NOT NULL ORDER BY variant_id, observed_on"
    )
    for variant_id, observed_on, market in rows:
        if variant_id in wanted:
            history.setdefault(variant_id, []).append((observed_on, market))
    movers: list[dict[str, Any]] = []
    for card_id, (variant_id, type_, observed_on, market, expansion_id) in heads.items():
        for window, days in WINDOWS.items():
            entry = window_entry(history.get(variant_id, []), (observed_on, market), as_of, days)
            if entry is not None:
                movers.append(
                    {
                        "card_id": card_id,
                        "expansion_id": expansion_id,
                        "window": window,
                        "card_variant_id": variant_id,
                        "printing": type_,
                        **entry,
                    }
                )
    _rank(movers)
    for start in range(0, len(movers), 5000):
        session.execute(insert(CardMover), movers[start : start + 5000])
    return len(movers)
