"""Text from outside (a webhook receiver's reply) made safe to put in a log line.

A receiver chooses its answer, so logged verbatim it could end our line and forge the next one with a
newline, repaint or erase a terminal with ANSI escapes, reorder what a reader sees with bidirectional
controls, or fill the log. `loggable` writes every character that is not plain printable text as a
Python-style escape (`\\n`, `\\x1b`, `\\u202e`) and keeps at most `limit` characters of the result; a
backslash is doubled, so an escape in the log always means the receiver sent that character.
"""

from __future__ import annotations

import re

# How much of a receiver's text a log line keeps.
LOG_TEXT_CHARS = 200
# C0 and C1 controls and DEL (newline, carriage return, ESC...), the Unicode line and paragraph
# separators, zero-width and bidirectional formatting characters, the byte-order mark, lone surrogates,
# and the backslash itself.
_UNSAFE_CHARS = "\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ud800-\udfff"
# One unsafe character, or a run of safe ones.
_PIECE = re.compile(f"([{_UNSAFE_CHARS}])|[^{_UNSAFE_CHARS}]+")
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def loggable(text: str, limit: int = LOG_TEXT_CHARS) -> str:
    """`text` fit for one log line: unsafe characters escaped, at most `limit` characters of that (an
    escape is never cut in two), and a note of how many characters of `text` were left out."""
    out: list[str] = []
    size = used = 0  # characters written, characters of `text` they stand for
    for match in _PIECE.finditer(text, 0, min(len(text), limit)):
        if match.group(1) is not None:
            piece = _escape(match.group(1))
            if size + len(piece) > limit:
                break
            taken = 1
        else:
            piece = match.group()[: limit - size]
            taken = len(piece)
        out.append(piece)
        size += len(piece)
        used += taken
        if size >= limit:
            break
    dropped = len(text) - used
    return "".join(out) + (f"... ({dropped} more characters)" if dropped > 0 else "")
