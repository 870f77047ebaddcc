"""The layout of a page's cards (#48): pockets named by the grid the cards fill, empty pockets between
them listed, and anything that is not a grid read like text. Quads alone, no network."""

from __future__ import annotations

import math

import numpy as np
import pytest

from serve_app.page_layout import arrange, reading_order

W, H = 63.0, 88.0  # a card, in px
PITCH = (W * 1.1, H * 1.1)  # pockets with their seams


def card(cx: float, cy: float, turn_deg: float = 0.0, scale: float = 1.0) -> np.ndarray:
    a = math.radians(turn_deg)
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    half = np.array([[-W, -H], [W, -H], [W, H], [-W, H]]) * scale / 2
    return (half @ rot.T + [cx, cy]).astype(np.float32)


def pocket(row: int, col: int, turn_deg: float = 0.0) -> np.ndarray:
    """The card in pocket (row, col), counted from 1, of a page whose top-left pocket is at (100, 100)."""
    return card(100 + (col - 1) * PITCH[0], 100 + (row - 1) * PITCH[1], turn_deg)


def test_a_full_page_names_every_pocket_in_reading_order_whatever_order_the_cards_came_in() -> None:
    places = [(r, c) for r in (1, 2, 3) for c in (1, 2, 3)]
    shuffled = [places[i] for i in np.random.default_rng(0).permutation(len(places))]
    quads = [pocket(r, c, turn_deg=2.0) for r, c in shuffled]
    layout = arrange(quads)
    assert layout.layout == "grid" and layout.grid == (3, 3) and layout.empty == []
    assert layout.slots is not None
    assert [layout.slots[i] for i in layout.order] == places
    assert all(layout.slots[i] == shuffled[i] for i in range(len(quads)))


def test_pockets_between_cards_with_nothing_found_are_listed_empty_where_a_card_would_lie() -> None:
    held = [(1, 1), (1, 3), (2, 1), (2, 2), (2, 3), (3, 1), (3, 3)]  # (1, 2) and (3, 2) empty
    layout = arrange([pocket(r, c) for r, c in held])
    assert layout.layout == "grid" and layout.grid == (3, 3)
    assert layout.empty is not None
    assert [slot for slot, _ in layout.empty] == [(1, 2), (3, 2)]
    for slot, quad in layout.empty:
        assert np.abs(quad - pocket(*slot)).max() < 2.0


def test_a_whole_empty_column_between_cards_is_still_a_column() -> None:
    layout = arrange([pocket(r, c) for r in (1, 2) for c in (1, 3)])
    assert layout.grid == (2, 3) and layout.empty is not None
    assert [slot for slot, _ in layout.empty] == [(1, 2), (2, 2)]


@pytest.mark.parametrize(
    "quads",
    [
        [card(100, 100, 30), card(300, 120, -40), card(200, 400, 75)],  # a spread at any angle
        [card(100, 100), card(500, 100), card(900, 100)],  # upright but far apart: on a table
        [pocket(1, 1), pocket(1, 2), card(100 + PITCH[0] * 0.5, 100 + PITCH[1])],  # off the lattice
    ],
    ids=["turned", "apart", "off-lattice"],
)
def test_cards_that_do_not_fill_a_grid_are_free_and_read_rows_first(quads: list[np.ndarray]) -> None:
    layout = arrange(quads)
    assert layout.layout == "free" and layout.slots is None and layout.grid is None
    assert layout.order == reading_order(quads)


def test_reading_order_is_rows_top_to_bottom_then_left_to_right() -> None:
    quads = [card(400, 105), card(100, 300), card(100, 100), card(250, 95), card(300, 310)]
    assert reading_order(quads) == [2, 3, 0, 1, 4]


def test_one_card_is_a_free_layout_of_one() -> None:
    layout = arrange([card(200, 200)])
    assert layout.layout == "free" and layout.order == [0]
    assert arrange([]).order == []
