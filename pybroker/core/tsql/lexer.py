"""Tokens of T-SQL text for the route DDL of SPEC R10.

Words (keywords and plain identifiers, compared case-insensitively by the parser),
[bracketed] and "double-quoted" identifiers (``]]`` and ``""`` stand for one closing
character), '..' and N'..' strings (``''`` stands for one quote), numbers and punctuation.
``--`` line comments and ``/* */`` block comments (nested, as SQL Server nests them) are
skipped. Each token knows its line and column (both from 1), so every error can point at
the text.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

from pybroker.errors import TsqlSyntaxError

Kind = Literal["word", "identifier", "string", "number", "symbol", "end"]

_SYMBOLS = frozenset("=,;()+-.*/<>!%&|^~:")
_DIGITS = frozenset("0123456789")
_SHOWN_CHARACTERS = 40  # a long string or name is shortened in messages
_WHERE = "\x00where\x00"  # stands for the position in a message until it is known
_BOM = "\ufeff"
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Token:
    """One token: ``text`` is a word as written, an identifier or a string unquoted."""

    kind: Kind
    text: str
    line: int
    column: int
    quote: str = ""  # the opening quote of an identifier or string: '[', '"', "'" or "N'"

    @property
    def where(self) -> str:
        return f"line {self.line}, column {self.column}"

    def is_word(self, *words: str) -> bool:
        """A keyword test: T-SQL keywords are case-insensitive."""
        return self.kind == "word" and self.text.upper() in words

    def is_symbol(self, symbol: str) -> bool:
        return self.kind == "symbol" and self.text == symbol

    def describe(self) -> str:
        """The token as a message shows it, e.g. ``the string N'x'`` or ``'SELECT'``."""
        if self.kind == "end":
            return "the end of the batch"
        text = self.text
        if len(text) > _SHOWN_CHARACTERS:
            text = text[:_SHOWN_CHARACTERS] + "..."
        if self.kind == "string":
            return f"the string {self.quote}{text.replace(chr(39), chr(39) * 2)}'"
        if self.kind == "identifier":
            close = "]" if self.quote == "[" else '"'
            return f"the quoted identifier {self.quote}{text.replace(close, close * 2)}{close}"
        return f"'{text}'"


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with one ``end`` token (where the text ends).

    Raises TsqlSyntaxError for an unterminated string, identifier or comment, or a
    character T-SQL has no use for here.
    """
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def position(at: int) -> tuple[int, int]:
        line = bisect_right(newlines, at - 1)  # the newlines before ``at``
        start = newlines[line - 1] + 1 if line else 0
        return line + 1, at - start + 1

    def error(message: str, at: int) -> TsqlSyntaxError:
        # The message holds the offending text itself (which may contain braces), so the
        # position is put in by replacement, never by str.format.
        line, column = position(at)
        return TsqlSyntaxError(message.replace(_WHERE, f"line {line}, column {column}", 1))

    bad = _NOT_TEXT.search(text)
    if bad is not None:
        ch = bad.group()
        what = "a NUL character" if ch == "\0" else f"a lone surrogate U+{ord(ch):04X}"
        raise error(f"{what} at {_WHERE} is not text: T-SQL must be valid Unicode "
                    "(encodable as UTF-8) without NUL characters", bad.start())

    tokens: list[Token] = []
    i, n = 0, len(text)
    if text.startswith(_BOM):
        i = 1  # a script saved "with signature": the byte order mark is no part of the text
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        start = i
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            i = _block_comment_end(text, i)
            if i < 0:
                raise error(f"unterminated /* comment starting at {_WHERE}: expected '*/'",
                            start)
            continue
        quote = ""
        if ch == "'":
            quote = "'"
        elif ch in "Nn" and text.startswith("'", i + 1):
            quote = "N'"
        if quote:
            found = _quoted(text, i + len(quote), "'")
            if found is None:
                raise error(
                    f"unterminated string starting at {_WHERE}: expected a closing ' "
                    "(write '' for a quote inside a string)",
                    start,
                )
            value, i = found
            tokens.append(Token("string", value, *position(start), quote=quote))
            continue
        if ch in '["':
            close = "]" if ch == "[" else '"'
            found = _quoted(text, i + 1, close)
            if found is None:
                raise error(
                    f"unterminated quoted identifier starting at {_WHERE}: expected a closing "
                    f"{close} (write {close * 2} for one inside the name)",
                    start,
                )
            value, i = found
            tokens.append(Token("identifier", value, *position(start), quote=ch))
            continue
        if ch in _DIGITS:
            # The whole run (1.5, 1e3, 0x1F, 600abc) is one token, so a value that is not a
            # whole number is refused as a whole (R10.2) rather than half-read.
            while i < n and (text[i].isalnum() or text[i] in "._" or (
                    text[i] in "+-" and text[i - 1] in "eE" and i + 1 < n
                    and text[i + 1] in _DIGITS and text[start:i - 1].replace(".", "").isdigit())):
                i += 1  # 1.5e-3 is one number
            tokens.append(Token("number", text[start:i], *position(start)))
            continue
        if ch.isalpha() or ch in "_@#":
            while i < n and (text[i].isalnum() or text[i] in "_@#$"):
                i += 1
            tokens.append(Token("word", text[start:i], *position(start)))
            continue
        if ch in _SYMBOLS:
            i += 1
            tokens.append(Token("symbol", ch, *position(start)))
            continue
        raise error(
            f"unexpected character {ch!r} at {_WHERE}: expected a keyword, a name, "
            "a 'string', a number, '=', ',' or ';'",
            start,
        )
    tokens.append(Token("end", "", *position(n)))
    return tokens


def _block_comment_end(text: str, i: int) -> int:
    """The index just after the ``*/`` closing the comment opened at ``i``, or -1."""
    depth, i = 1, i + 2
    while depth:
        close = text.find("*/", i)
        if close < 0:
            return -1
        opened = text.find("/*", i, close)
        if opened >= 0:
            depth, i = depth + 1, opened + 2
        else:
            depth, i = depth - 1, close + 2
    return i


def _quoted(text: str, i: int, close: str) -> tuple[str, int] | None:
    """Read up to the closing quote (a doubled quote stands for one): (value, next index),
    or None when the text ends first."""
    parts = []
    while True:
        end = text.find(close, i)
        if end < 0:
            return None
        parts.append(text[i:end])
        if text.startswith(close * 2, end):
            parts.append(close)
            i = end + 2
            continue
        return "".join(parts), end + 1
