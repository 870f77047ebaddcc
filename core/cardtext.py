"""How a card's collector number and footer are written: the rules search, ingest and the scanner share.

They lived in the feed parser, so search (a read) and the scanner's fusion depended on the ingest
module; here, in `core`, they depend on nothing of ours."""

from __future__ import annotations

import re
from typing import Any

_DIGITS = re.compile(r"\d+")


def normalize_number(number: str | None) -> str | None:
    if number is None:
        return None
    head = number.split("/", 1)[0].strip()
    return _DIGITS.sub(lambda m: str(int(m.group())), head) or None


def printed_number(number: str, total: Any) -> str:
    """The collector number the way a card prints it (`../shared/tools/cardrender.py`): '25' of 198 is
    '025/198'; numbers that are not plain digits ('TG05') print as they are."""
    if total and number.isdigit():
        width = max(3, len(str(int(total))))
        return f"{int(number):0{width}d}/{int(total):0{width}d}"
    return number


def footer_line(set_code: str | None, number: str | None, total: Any) -> str:
    """A card's printed footer line: 'SSP 025/191', or '025/102' where the expansion prints a symbol."""
    printed = printed_number(str(number or ""), total)
    return f"{set_code} {printed}" if set_code else printed
