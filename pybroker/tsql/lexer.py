"""Tokens of T-SQL text: words, [bracketed] and "quoted" identifiers, '..' and N'..'
strings, numbers, punctuation; ``--`` and ``/* */`` comments skipped. Each token knows its
line and column, so every error can point at the text."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Literal

from pybroker.errors import TsqlSyntaxError

Kind = Literal["word", "identifier", "string", "number", "symbol", "end"]

_SYMBOLS = "=,;()+-.*"


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    text: str  # a word as written; an identifier or string unquoted
    line: int
    column: int

    @property
    def where(self) -> str:
        return f"line {self.line}, column {self.column}"

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words

    def describe(self) -> str:
        if self.kind == "end":
            return "the end of the batch"
        if self.kind == "string":
            return f"the string '{self.text}'"
        return f"'{self.text}'"


def tokenize(text: str) -> list[Token]:
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def position(at: int) -> tuple[int, int]:
        line = bisect_right(newlines, at - 1)  # newlines before ``at``
        start = newlines[line - 1] + 1 if line else 0
        return line + 1, at - start + 1

    def error(message: str, at: int) -> TsqlSyntaxError:
        line, column = position(at)
        return TsqlSyntaxError(f"{message} at line {line}, column {column}")

    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        kind: Kind
        if ch.isspace():
            i += 1
            continue
        start = i
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise error("unterminated /* comment", i)
            i = end + 2
            continue
        if ch == "'" or (ch in "Nn" and text.startswith("'", i + 1)):
            found = _quoted(text, i + (1 if ch == "'" else 2), "'")
            if found is None:
                raise error("unterminated string", start)
            (value, i), kind = found, "string"
        elif ch in '["':
            found = _quoted(text, i + 1, "]" if ch == "[" else '"')
            if found is None:
                raise error(f"unterminated {ch}identifier", start)
            (value, i), kind = found, "identifier"
        elif ch.isdigit():
            while i < n and (text[i].isalnum() or text[i] == "."):
                i += 1
            value, kind = text[start:i], "number"
        elif ch.isalpha() or ch in "_@#":
            while i < n and (text[i].isalnum() or text[i] in "_@#$"):
                i += 1
            value, kind = text[start:i], "word"
        elif ch in _SYMBOLS:
            i += 1
            value, kind = ch, "symbol"
        else:
            raise error(f"unexpected character {ch!r}", i)
        tokens.append(Token(kind, value, *position(start)))
    tokens.append(Token("end", "", *position(n)))
    return tokens


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
