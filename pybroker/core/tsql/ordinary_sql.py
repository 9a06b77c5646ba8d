"""The ordinary SQL of a T-SQL batch, translated, not parsed by hand a second time: SELECT
(with FROM), INSERT, UPDATE, DELETE, CREATE TABLE and DROP TABLE, and the subquery of
IF [NOT] EXISTS (...). The T-SQL lexer only finds where such a statement ends; sqlglot
reads its text (``read="tsql"``) and writes it for DuckDB (``write="duckdb"``), and a
construct either side cannot carry is refused when the batch is parsed, with its line and
column, so a refused batch runs nothing (the house rule of STYLE.md; issue 46 item 4).

What the tree is given before DuckDB's text is written (never by patching text):

- ``@variables`` become named parameters ($p0, $p1, ...), bound to the variables' values
  when the statement runs; a value is never spliced into the text.
- A user table (``t``, ``dbo.t``, ``db.dbo.t``) lives in its database's own schema of the
  instance file, ``<database>_dbo`` (``Inventory_dbo.log`` for Inventory.dbo.log), beside
  the broker's ``sys`` views, so an analyst reads it with ``pybroker query`` or DuckDB's
  CLI.
  Only the dbo schema of a database is kept (SQL Server's default schema): other schema
  names and temporary tables (#t) are refused.
- ``sys.<view>`` is the view with this database's rows only (a view of one database in
  SQL Server; pybroker's views hold every database, with a database_name column): the
  view of rows whose database_name is the batch's, without that column. A view of the
  whole instance (sys.databases, sys.certificates, ...) is read as it is.
- A queue named in FROM is a read-only view of its messages with SQL Server's column names
  (SELECT ... FROM <queue>, as SQL Server allows), from sys.queue_messages.
- ``NVARCHAR(MAX)``-style lengths are left out (DuckDB's text has none); ``XML`` columns are
  text.

Functions sqlglot does not know (a user function, OBJECT_ID inside a query, the XML methods
.value() and the others) are refused, not passed through for DuckDB to fail on halfway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.ordinary_sql_statement import (
    OrdinarySql,
    Rendered,
    SqlNames,
    TableVariable,
)
from pybroker.core.tsql.parser import STATEMENT_WORDS, Parser
from pybroker.errors import TsqlSyntaxError

if TYPE_CHECKING:  # pragma: no cover
    pass

# How deep parentheses may nest in ordinary SQL: sqlglot's reader recurses about twenty
# frames a level, so deeper text is refused before it could exhaust Python's stack.
MAX_SQL_DEPTH = 32
# JOINs in a row without an ON a statement may hold (``_refuse_open_joins``)
MAX_OPEN_JOINS = 6
# After these words a SELECT goes on the statement being read (INSERT ... SELECT, UNION).
_SELECT_AFTER = ("UNION", "ALL", "EXCEPT", "INTERSECT")


@dataclass(frozen=True, slots=True)
class Exists:
    """EXISTS (subquery) in a condition of IF or WHILE (NOT EXISTS is a Not around it)."""

    query: OrdinarySql
    token: Token


def starts_ordinary_sql(p: Parser[Any]) -> bool:
    """Whether the statement at ``p`` is ordinary SQL: INSERT, UPDATE, DELETE, CREATE or
    DROP TABLE, or a SELECT with a FROM (SELECT columns FROM @table alone and a SELECT of
    values stay the batch's own)."""
    t = p.token
    after = p.tokens[p.pos + 1] if p.pos + 1 < len(p.tokens) else t
    if t.is_word("INSERT", "UPDATE", "DELETE"):
        return True
    if t.is_word("CREATE", "DROP"):
        return after.is_word("TABLE")
    if not t.is_word("SELECT"):
        return False
    end = _statement_end(p.tokens, p.pos)
    depth = 0
    for i in range(p.pos + 1, end):
        token = p.tokens[i]
        if token.is_symbol("("):
            depth += 1
        elif token.is_symbol(")"):
            depth -= 1
        elif depth == 0 and token.is_word("FROM"):
            following = p.tokens[i + 1]
            if not (following.kind == "word" and following.text.startswith("@")):
                return True
            # SELECT * | columns FROM @table alone is the batch's own; anything more (TOP,
            # assignments, WHERE, JOIN, ORDER BY) is a query over the table variable
            items = p.tokens[p.pos + 1 : i]
            simple = all(t.is_symbol("*") or t.is_symbol(",") or (
                t.kind in ("word", "identifier") and not t.text.startswith("@")
                and not t.is_word("TOP", "DISTINCT")) for t in items)
            return not (simple and i + 2 == end)
    return False


def _statement_end(tokens: list[Token], start: int) -> int:
    """The index of the token after the statement that begins at ``start``: a ';', the end,
    a closing parenthesis it did not open, or a word that begins another statement outside
    its parentheses and CASE ... END (but SELECT after INSERT's target or UNION, SET after
    UPDATE's table)."""
    first = tokens[start].text.upper()
    depth = cases = 0
    set_taken = select_taken = False
    i = start + 1
    while True:
        t = tokens[i]
        if t.kind == "end" or t.is_symbol(";"):
            return i
        if t.is_symbol("("):
            depth += 1
            if depth > MAX_SQL_DEPTH:
                raise TsqlSyntaxError(
                    f"'(' at {t.where} is nested too deeply: expected at most "
                    f"{MAX_SQL_DEPTH} levels of parentheses in a statement of ordinary SQL")
        elif t.is_symbol(")"):
            if depth == 0:
                return i
            depth -= 1
        elif t.is_word("CASE"):
            cases += 1
        elif t.is_word("END") and cases:
            cases -= 1
        elif depth == 0 and t.is_word("VALUES"):
            select_taken = True  # INSERT ... VALUES (...) takes no SELECT after it
        elif depth == 0 and not cases and t.kind == "word" and t.text.upper() in (
                STATEMENT_WORDS):
            word = t.text.upper()
            previous = tokens[i - 1]
            if word == "SELECT" and (previous.is_word(*_SELECT_AFTER) or (
                    first == "INSERT" and not select_taken)):
                select_taken = True
            elif word == "SET" and first == "UPDATE" and not set_taken:
                set_taken = True
            elif word == "DELETE" and previous.is_word("ON"):
                pass  # ON DELETE CASCADE of a foreign key
            elif word == "UPDATE" and previous.is_word("ON"):
                pass
            elif word == "IF" and previous.is_word("TABLE"):
                pass  # DROP TABLE IF EXISTS
            else:
                return i
        i += 1


def read_statement(p: Parser[Any], declared: set[str], source: Callable[[Token, Token], str]
                   ) -> OrdinarySql:
    """The ordinary SQL statement at ``p`` (``starts_ordinary_sql``), read to its end;
    ``declared``: the variables declared so far; ``source``: the script's text between two
    tokens."""
    start = p.token
    end_index = _statement_end(p.tokens, p.pos)
    end = p.tokens[end_index]
    text = source(start, end)
    _refuse_open_joins(p.tokens[p.pos:end_index])
    p.pos = end_index
    return translate(text, start, declared)


def _refuse_open_joins(tokens: list[Token]) -> None:
    """sqlglot's T-SQL reader takes time exponential in the JOINs in a row that have no ON
    yet (each may open a nested join): more than MAX_OPEN_JOINS are refused before it
    reads them."""
    open_joins = 0
    for i, t in enumerate(tokens):
        if t.is_word("ON", "USING"):
            open_joins = 0
        elif t.is_word("JOIN") and not (i and tokens[i - 1].is_word("CROSS")):
            open_joins += 1
            if open_joins > MAX_OPEN_JOINS:
                raise TsqlSyntaxError(
                    f"JOIN at {t.where} follows {MAX_OPEN_JOINS} JOINs without their ON: "
                    f"expected at most {MAX_OPEN_JOINS} joins in a row before an ON")


def read_exists(p: Parser[Any], declared: set[str], source: Callable[[Token, Token], str]
                ) -> Exists:
    """EXISTS (SELECT ...): the subquery read as ordinary SQL."""
    t = p.advance()
    p.require("(", "'(' and a subquery after EXISTS")
    if not p.token.is_word("SELECT"):
        raise p.expected("SELECT (EXISTS takes a subquery)")
    query = read_statement(p, declared, source)
    p.require(")", "')' to close EXISTS (")
    return Exists(query, t)


def source_text(lines: list[str], start: Token, end: Token) -> str:
    """The script's text (``lines``) from ``start`` up to ``end`` (not included)."""
    if end.kind == "end" and end.line > len(lines):
        end = Token("end", "", len(lines), len(lines[-1]) + 1)
    if start.line == end.line:
        return lines[start.line - 1][start.column - 1 : end.column - 1].rstrip()
    text = [lines[start.line - 1][start.column - 1 :], *lines[start.line : end.line - 1],
            lines[end.line - 1][: end.column - 1]]
    return "\n".join(text).rstrip()


def source_of(p: Parser[Any]) -> Callable[[Token, Token], str]:
    """The text between two tokens of the script ``p`` reads."""
    return lambda start, end: source_text(p.lines, start, end)


def translate(text: str, start: Token, declared: set[str]) -> OrdinarySql:
    """Read ``text`` (a statement that begins at ``start``) with sqlglot's T-SQL dialect
    and check that DuckDB's can write all of it; refused with the line and column
    (ordinary_sql_translation.py: sqlglot is imported with the first statement read, not
    with pybroker)."""
    from pybroker.core.tsql import ordinary_sql_translation

    return ordinary_sql_translation.translate(text, start, declared)


def render(statement: OrdinarySql, database: str, names: SqlNames,
           text_variables: frozenset[str] = frozenset(),
           tables: dict[str, TableVariable] | None = None) -> Rendered:
    """The statement's DuckDB text for ``database``, with its names resolved (``names``);
    ``text_variables``: the keys of its variables declared of a text type; ``tables``: its
    table variables (ordinary_sql_translation.render)."""
    from pybroker.core.tsql import ordinary_sql_translation

    return ordinary_sql_translation.render(statement, database, names, text_variables, tables)

