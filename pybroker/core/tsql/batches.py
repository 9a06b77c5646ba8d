"""A T-SQL script split into its batches at each GO line (sqlcmd's rule), every batch parsed
(conversation_parser.py) before any of them runs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pybroker.core.tsql.conversation_parser import (
    ScriptStatement,
    parse_tokens,
    runs_in_master,
)
from pybroker.core.tsql.lexer import Token, tokenize
from pybroker.errors import TsqlSyntaxError

# A line that separates batches: GO, an optional count, an optional comment (sqlcmd's rule).
_SEPARATOR = re.compile(r"\s*GO(?:\s+([0-9]+))?\s*(?:--.*)?", re.IGNORECASE)
_MAX_REPEAT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch of a script: its statements, and how many times it runs (GO n)."""

    statements: list[ScriptStatement]
    count: int = 1


def parse_batches(text: str, *, master: bool = False) -> list[Batch]:
    """Split a script into batches at each line that holds only GO [count] (never inside
    a string or a comment) and parse every batch (``parse_script``) before anything runs.
    Batches without a statement (GO GO) are left out; a script without any statement is
    refused as an empty batch is."""
    if not isinstance(text, str):
        raise TsqlSyntaxError(f"T-SQL must be text, not {type(text).__name__}")
    tokens = tokenize(text)
    lines = text.removeprefix("\ufeff").split("\n")  # as the lexer counts lines
    pieces: list[tuple[list[Token], int]] = []
    start = i = 0
    while i < len(tokens):
        t = tokens[i]
        found = t.is_word("GO") and _SEPARATOR.fullmatch(lines[t.line - 1])
        if not found:
            i += 1
            continue
        count = 1
        if found.group(1) is not None:
            count = int(found.group(1))
            if not 1 <= count <= _MAX_REPEAT:
                raise TsqlSyntaxError(
                    f"GO {found.group(1)} at {t.where}: expected a count from 1 to "
                    f"{_MAX_REPEAT} (how many times the batch before it runs)")
        pieces.append(([*tokens[start:i], Token("end", "", t.line, t.column)], count))
        i += 2 if found.group(1) is not None else 1
        start = i
    pieces.append((tokens[start:], 1))
    batches = []
    for piece, count in pieces:
        if len(piece) > 1:
            batches.append(Batch(parse_tokens(piece, master, lines, batches=True), count))
            master = runs_in_master(batches[-1].statements, master)  # USE lasts past GO
    if not batches:
        parse_tokens(pieces[-1][0], master, lines)  # raises: the batch holds no statement
    return batches
