"""The translation of ordinary_sql.py's statements by sqlglot: read as T-SQL, checked, and
written as DuckDB's SQL for a database's own schema. Apart from ordinary_sql.py so that
sqlglot is imported with the first ordinary statement a batch holds, not with pybroker."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError

from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.ordinary_sql_statement import (
    DATABASE_PARAMETER,
    DEFAULT_SCHEMA,
    QUEUE_COLUMNS,
    OrdinarySql,
    Rendered,
    SqlNames,
    TableVariable,
    schema_of,
)
from pybroker.errors import TsqlSyntaxError

_NULL_COLUMNS = ("service_id", "service_contract_id", "message_type_id")
_TEXT_TYPES = (exp.DataType.Type.VARCHAR, exp.DataType.Type.NVARCHAR, exp.DataType.Type.CHAR,
               exp.DataType.Type.NCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.XML)
_TYPES_AS = {exp.DataType.Type.XML: "VARCHAR", exp.DataType.Type.MONEY: "DECIMAL(19, 4)",
             exp.DataType.Type.SMALLMONEY: "DECIMAL(10, 4)", exp.DataType.Type.IMAGE: "BLOB"}
_XML_METHODS = ("VALUE", "EXIST", "QUERY", "NODES", "MODIFY")
_KINDS = {exp.Select: "SELECT", exp.Union: "SELECT", exp.Insert: "INSERT",
          exp.Update: "UPDATE", exp.Delete: "DELETE"}


def translate(text: str, start: Token, declared: set[str]) -> OrdinarySql:
    """Read ``text`` (a statement that begins at ``start``) with sqlglot's T-SQL dialect
    and check that DuckDB's can write all of it; refused with the line and column."""
    try:
        with _quiet_sqlglot():
            trees = sqlglot.parse(text, read="tsql", error_level=ErrorLevel.IMMEDIATE)
    except ParseError as exc:
        found = exc.errors[0] if exc.errors else {}
        line, column = found.get("line"), found.get("col")
        where = start.where
        if isinstance(line, int) and isinstance(column, int):  # col: the token's last
            column -= len(str(found.get("highlight") or " ")) - 1
            if line == 1:
                column += start.column - 1
            where = f"line {start.line + line - 1}, column {column}"
        reason = re.sub(r"<Token [^>]*?text: (.*?), line[^>]*>", r"'\1'",
                        str(found.get("description") or exc)).split(". Line")[0]
        raise TsqlSyntaxError(
            f"the {_first_words(text)} statement at {start.where} is not understood at "
            f"{where}: {reason} (ordinary SQL is read by sqlglot's T-SQL dialect)") from None
    except SqlglotError as exc:
        raise TsqlSyntaxError(
            f"the statement at {start.where} is not understood: {exc}") from None
    except RecursionError:
        raise TsqlSyntaxError(
            f"the {_first_words(text)} statement at {start.where} is nested too deeply for "
            "sqlglot's T-SQL dialect to read") from None
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        # sqlglot's reader failing on text it cannot read (a slip of its own): refused
        raise TsqlSyntaxError(
            f"the {_first_words(text)} statement at {start.where} is not understood: "
            f"sqlglot's T-SQL dialect could not read it ({type(exc).__name__})") from None
    if len(trees) != 1 or trees[0] is None:
        raise TsqlSyntaxError(f"expected one statement at {start.where}, not {len(trees)}")
    tree = trees[0]
    if isinstance(tree, exp.Command):  # sqlglot's way to keep a statement it cannot read
        raise TsqlSyntaxError(
            f"the {_first_words(text)} statement at {start.where} is not understood: "
            "sqlglot's T-SQL dialect cannot read all of it (it would keep it as text, "
            "untranslated); expected the statement as SQL Server's documentation writes it")
    kind = _kind(tree, start)
    refuse = _Refusal(start)
    assigns = _assigns(tree, declared, refuse) if kind == "SELECT" else ()
    targets = {id(e.this) for e in tree.expressions} if assigns else set()
    parameters: dict[str, str] = {}
    tables: dict[str, None] = {}
    for node in list(tree.walk()):
        _check(node, refuse)
        if isinstance(node, exp.Parameter) and isinstance(node.parent, exp.Table):
            tables[_variable(node, declared, refuse)] = None  # a table variable
        elif isinstance(node, exp.Parameter) and id(node) not in targets and not isinstance(
                node.parent, exp.Parameter):
            parameters.setdefault(_variable(node, declared, refuse), f"p{len(parameters)}")
    if isinstance(tree, exp.Update) and _table_variable(tree.this) is not None:
        raise refuse("UPDATE of a table variable (DELETE its rows and INSERT them again)")
    statement = OrdinarySql(kind, tree, tuple((name, key) for key, name in parameters.items()),
                            assigns, start, tuple(tables))
    render(statement, "database", SqlNames())  # what DuckDB cannot be given is refused now
    return statement


class _WhileParsingHere(logging.Filter):
    """Drops what sqlglot logs from a thread while that thread parses a batch's statement:
    nothing of another thread's (the application's own use of sqlglot), and nothing at
    other times, so the application's logging is as it set it."""

    def __init__(self) -> None:
        super().__init__()
        self.here = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.here, "parsing", False)


_WHILE_PARSING = _WhileParsingHere()


@contextlib.contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    """sqlglot warns (on its logger, which Python prints to stderr when nothing handles it)
    of a statement it keeps as text; that statement is refused here instead, so its warning
    is dropped: only this thread's, only while it parses (the logger's level is never
    changed, which would silence every thread)."""
    logger = logging.getLogger("sqlglot")
    if _WHILE_PARSING not in logger.filters:
        logger.addFilter(_WHILE_PARSING)
    _WHILE_PARSING.here.parsing = True
    try:
        yield
    finally:
        _WHILE_PARSING.here.parsing = False


class _Refusal:
    def __init__(self, start: Token) -> None:
        self.start = start

    def __call__(self, what: str) -> TsqlSyntaxError:
        return TsqlSyntaxError(f"the statement at {self.start.where} is not supported: {what}")


def _first_words(text: str) -> str:
    words = text.split()
    two = " ".join(words[:2]).upper()
    return two if two in ("CREATE TABLE", "DROP TABLE") else words[0].upper()


def _kind(tree: exp.Expression, start: Token) -> str:
    for kind, name in _KINDS.items():
        if isinstance(tree, kind):
            return name
    if isinstance(tree, (exp.Create, exp.Drop)) and str(tree.args.get("kind")).upper() == (
            "TABLE"):
        return f"{type(tree).__name__.upper()} TABLE"
    raise TsqlSyntaxError(
        f"the statement at {start.where} is not SELECT, INSERT, UPDATE, DELETE, CREATE TABLE "
        "or DROP TABLE: expected one of those (the ordinary SQL a batch runs)")


def _check(node: exp.Expression, refuse: _Refusal) -> None:
    """Refuse what DuckDB would not be given as the T-SQL means it."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this).upper()
        if name in _XML_METHODS and isinstance(node.parent, exp.Dot):
            raise refuse(f"the XML method .{node.this}() is not supported in a query: "
                         "SELECT the column into an XML variable and call it on that "
                         "(@x.value(...) in SET, IF, PRINT)")
        raise refuse(f"the function {node.this}() is not one sqlglot's T-SQL dialect knows, "
                     "so it cannot be translated for DuckDB")
    if isinstance(node, exp.Identifier) and node.args.get("temporary"):
        raise refuse(f"the temporary table #{node.name} (use a table of the database, or a "
                     "table variable)")
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.USERDEFINED and (
            str(node.args.get("kind")).upper() != "SYSNAME"):
        raise refuse(f"the type {node.args.get('kind')} (a user-defined type)")
    if isinstance(node, exp.Into):
        raise refuse("SELECT ... INTO (CREATE TABLE first, then INSERT ... SELECT)")
    if isinstance(node, exp.Table) and node.db and node.db.lower() not in (
            DEFAULT_SCHEMA, "sys"):
        raise refuse(f"the schema {node.db} of {node.name}: a database's tables are in its "
                     f"{DEFAULT_SCHEMA} schema (SQL Server's default)")


def _variable(node: exp.Parameter, declared: set[str], refuse: _Refusal) -> str:
    inner = node.this
    if isinstance(inner, exp.Parameter) or not isinstance(inner, exp.Var):
        raise refuse(f"the system function @@{inner.name} inside a query (assign it to a "
                     "variable first)")
    key = f"@{inner.name}".upper()  # as expressions.variable_key names it
    if key not in declared:
        raise TsqlSyntaxError(f"the variable @{inner.name} in the statement at "
                              f"{refuse.start.where} is not declared: expected DECLARE "
                              f"@{inner.name} <type> before it is used")
    return key


def _assigns(tree: exp.Expression, declared: set[str], refuse: _Refusal) -> tuple[str, ...]:
    """SELECT @a = x, @b = y FROM ...: the variables, in order; () for a SELECT that returns
    rows. A SELECT that does both is refused (SQL Server's error 141)."""
    if not isinstance(tree, exp.Select):
        return ()
    targets = [e.this for e in tree.expressions
               if isinstance(e, exp.EQ) and isinstance(e.this, exp.Parameter)]
    if not targets:
        return ()
    if len(targets) != len(tree.expressions):
        raise refuse("a SELECT that assigns to variables and returns columns at once "
                     "(SELECT @v = col assigns only)")
    return tuple(_variable(t, declared, refuse) for t in targets)


# -- rendering for DuckDB, when the statement runs ---------------------------------------------


def _table_variable(node: exp.Expression | None) -> str | None:
    """The key of the table variable ``node`` names (a Table of a @parameter), or None."""
    if isinstance(node, exp.Schema):
        node = node.this
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Parameter):
        return f"@{node.this.this.name}".upper()
    return None


def _table_rows(table: exp.Table, key: str, found: TableVariable | None,
                columns: list[tuple[str, str, int]], numbered: bool) -> exp.Expression:
    """A table variable as a derived table: each column a list bound as a parameter and
    unnested (``numbered``: with ``__row``, the rows' numbers, for DELETE), under the
    variable's name or alias."""
    alias = table.alias or table.this.this.name
    names = [*(found.columns if found else ("__none",)), *(("__row",) if numbered else ())]
    types = [*(found.duckdb_types() if found else ("VARCHAR",)),
             *(("BIGINT",) if numbered else ())]
    items = []
    for index, (name, kind) in enumerate(zip(names, types, strict=True)):
        parameter = f"tv{len(columns)}"
        columns.append((parameter, key, -1 if name == "__row" else index))
        items.append(exp.alias_(exp.Anonymous(this="UNNEST", expressions=[exp.Cast(
            this=_parameter(parameter), to=exp.DataType.build(f"{kind}[]", dialect="duckdb"))]),
            exp.to_identifier(name, quoted=True)))
    return exp.Subquery(this=exp.select(*items),
                        alias=exp.TableAlias(this=exp.to_identifier(alias)))


def render(statement: OrdinarySql, database: str, names: SqlNames,
           text_variables: frozenset[str] = frozenset(),
           tables: dict[str, TableVariable] | None = None) -> Rendered:
    """The statement's DuckDB text for ``database``, with its names resolved (``names``);
    ``text_variables``: the keys of its variables declared of a text type; ``tables``: its
    table variables (None: when it is checked, before they hold anything).

    A table variable is the batch's own, not DuckDB's: it is read as a derived table
    (``_table_rows``), INSERT INTO @t runs its VALUES or SELECT for the batch to add the
    rows, and DELETE FROM @t selects the numbers of the rows the batch then removes."""
    refuse = _Refusal(statement.token)
    tree = statement.tree.copy()
    tables = tables or {}
    into: tuple[str, tuple[int, ...]] | None = None
    deletes: str | None = None
    target = _table_variable(tree.this) if isinstance(tree, (exp.Insert, exp.Delete)) else None
    if target is not None and isinstance(tree, exp.Insert):
        found = tables.get(target)
        named = [c.name.lower() for c in tree.this.expressions] if isinstance(
            tree.this, exp.Schema) else None
        if found is not None:
            for column in named or ():
                if column not in found.columns:
                    raise refuse(f"the column {column} is not a column of {target.lower()}; "
                                 f"its columns are {', '.join(found.columns)}")
            into = (target, tuple(found.columns.index(c) for c in named) if named else
                    tuple(range(len(found.columns))))
        else:
            into = (target, ())
        if tree.expression is None:
            raise refuse(f"INSERT INTO {target.lower()} without VALUES or a SELECT (a table "
                         "variable takes its rows from one of them)")
        tree = tree.expression
    elif target is not None and isinstance(tree, exp.Delete):
        deletes = target
        where = tree.args.get("where")
        query = exp.select(exp.column("__row")).from_(tree.this.copy())
        if where is not None:
            query.set("where", where.copy())
        tree = query
    for add in reversed(list(tree.find_all(exp.Add))):  # innermost first
        if _textual(add.this, text_variables) or _textual(add.expression, text_variables):
            add.replace(exp.DPipe(this=add.this.copy(), expression=add.expression.copy()))
    parameter_of = dict((key, name) for name, key in statement.parameters)
    values: dict[str, Any] = {}
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    targets = _written_tables(tree)
    if statement.assigns and isinstance(tree, exp.Select):  # the values assigned
        tree.set("expressions", [e.expression.copy() for e in tree.expressions])
    for node in list(tree.find_all(exp.Parameter)):
        if isinstance(node.parent, exp.Table):
            continue  # a table variable, replaced below
        key = f"@{node.this.name}".upper()
        node.replace(exp.Parameter(this=exp.Var(this=parameter_of[key])))
    table_columns: list[tuple[str, str, int]] = []
    for table in list(tree.find_all(exp.Table)):
        key = _table_variable(table)
        if key is not None:
            numbered = deletes is not None and table is tree.args["from_"].this
            table.replace(_table_rows(table, key, tables.get(key), table_columns, numbered))
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier) or (
                not table.db and table.name.lower() in ctes):
            continue
        replacement = _resolved(table, database, names, values, id(table) in targets, refuse)
        if replacement is not None:
            table.replace(replacement)
    for cast in list(tree.find_all(exp.Cast)):
        if cast.to.this in _TEXT_TYPES:
            cast.replace(_as_text(cast))
    for data_type in tree.find_all(exp.DataType):
        _duckdb_type(data_type)
    values.setdefault(DATABASE_PARAMETER, database)
    before: list[exp.Expression] = []
    created = tree.this.this if statement.kind == "CREATE TABLE" and isinstance(
        tree.this, exp.Schema) else None
    if isinstance(created, exp.Table):  # its schema first, then its IDENTITY sequences
        before.append(exp.Create(this=exp.Table(this=created.args["db"].copy(),
                                                db=_copied(created.args.get("catalog"))),
                                 kind="SCHEMA", exists=True))
        before.extend(_identities(tree.this, created))
    try:
        sql = tree.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
        first = tuple(e.sql(dialect="duckdb", unsupported_level=ErrorLevel.RAISE)
                      for e in before)
    except SqlglotError as exc:
        raise refuse(f"{exc} (DuckDB has no translation of it)") from None
    used = {p.this.name for p in tree.find_all(exp.Parameter)
            if isinstance(p.this, exp.Var)}
    return Rendered(sql, {k: v for k, v in values.items() if k in used},
                    statement.parameters, first,
                    statement.kind != "SELECT" and into is None and deletes is None,
                    tuple(table_columns), into, deletes)


def _copied(node: exp.Expression | None) -> exp.Expression | None:
    return None if node is None else node.copy()


def _identities(schema: exp.Schema, table: exp.Table) -> list[exp.Expression]:
    """IDENTITY(seed, increment) columns: DuckDB has no identity columns, so each takes its
    default from a sequence of its own (``<table>_<column>_identity``, beside the table),
    made (or made again, for a table dropped and created anew) before the table."""
    sequences: list[exp.Expression] = []
    for column in schema.expressions:
        if not isinstance(column, exp.ColumnDef):
            continue
        for constraint in column.constraints:
            kind = constraint.args.get("kind") if isinstance(
                constraint, exp.ColumnConstraint) else None
            if not isinstance(kind, exp.GeneratedAsIdentityColumnConstraint):
                continue
            name = exp.Table(this=exp.to_identifier(f"{table.name}_{column.name}_identity",
                                                    quoted=True),
                             db=table.args["db"].copy(),
                             catalog=_copied(table.args.get("catalog")))
            start = kind.args.get("start") or exp.Literal.number(1)
            step = kind.args.get("increment") or exp.Literal.number(1)
            sequences.append(exp.Create(
                this=name, kind="SEQUENCE", replace=True,
                expression=None, properties=exp.Properties(expressions=[
                    exp.SequenceProperties(start=start.copy(), increment=step.copy())])))
            constraint.set("kind", exp.DefaultColumnConstraint(this=exp.func(
                "nextval", exp.Literal.string(name.sql(dialect="duckdb")))))
    return sequences


def _written_tables(tree: exp.Expression) -> set[int]:
    """The tables a statement writes or drops (never a queue's or a sys view)."""
    written: set[int] = set()
    if isinstance(tree, (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop)):
        target = tree.this
        if isinstance(target, exp.Schema):
            target = target.this
        if isinstance(target, exp.Table):
            written.add(id(target))
    return written


def _resolved(table: exp.Table, database: str, names: SqlNames, values: dict[str, Any],
              written: bool, refuse: _Refusal) -> exp.Expression | None:
    name = table.name
    alias = table.alias or name
    if table.db.lower() == "sys":
        if written:
            raise refuse(f"sys.{name} is a catalog view: it is read-only")
        if name.lower() not in names.database_views:
            return None  # a view of the whole instance
        view = exp.select(exp.Star(except_=[exp.column("database_name")])).from_(
            exp.Table(this=exp.to_identifier(name), db=exp.to_identifier("sys"))).where(
            exp.column("database_name").eq(_parameter(DATABASE_PARAMETER)))
        return exp.Subquery(this=view, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    owner = table.catalog or database
    queue = _queue(name, names) if owner == database else None
    if queue is not None:
        if written:
            raise refuse(f"{name} is a queue: SELECT reads it; RECEIVE takes its messages")
        key = f"queue{len(values)}"
        values[key] = queue
        columns = [exp.Null().as_(c) if c in _NULL_COLUMNS else exp.column(c)
                   for c in QUEUE_COLUMNS]
        view = exp.select(*columns).from_(
            exp.Table(this=exp.to_identifier("queue_messages"),
                      db=exp.to_identifier("sys"))).where(
            exp.and_(exp.column("database_name").eq(_parameter(DATABASE_PARAMETER)),
                     exp.column("queue_name").eq(_parameter(key))))
        return exp.Subquery(this=view, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    resolved = exp.Table(this=table.this.copy(),
                         db=exp.to_identifier(schema_of(owner), quoted=True),
                         catalog=None if names.catalog is None else exp.to_identifier(
                             names.catalog, quoted=True))
    if table.args.get("alias") is not None:
        resolved.set("alias", table.args["alias"].copy())
    return resolved


def _queue(name: str, names: SqlNames) -> str | None:
    """The queue ``name`` names: the same name, else the only one of another case (names
    compare without regard to case under SQL Server's default collation)."""
    if name in names.queues:
        return name
    found = [q for q in names.queues if q.lower() == name.lower()]
    return found[0] if len(found) == 1 else None


def _parameter(name: str) -> exp.Parameter:
    return exp.Parameter(this=exp.Var(this=name))


def _textual(node: exp.Expression, text_variables: frozenset[str]) -> bool:
    """Whether ``node`` is text as far as the statement shows (a string, a CAST to text, a
    text variable, a concatenation): T-SQL's ``+`` of text is DuckDB's ``||``. Of two
    columns nothing shows it: ``a + b`` of text columns is written CONCAT(a, b)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal):
        return node.is_string
    if isinstance(node, exp.Cast):
        return node.to.this in _TEXT_TYPES
    if isinstance(node, exp.Parameter):
        return f"@{node.this.name}".upper() in text_variables
    return isinstance(node, (exp.DPipe, exp.Concat, exp.Upper, exp.Lower, exp.Trim,
                             exp.Substring))


def _as_text(cast: exp.Cast) -> exp.Expression:
    """CAST(x AS NVARCHAR(...) | XML | ...): a body's bytes decoded as UTF-8, as the batch's
    own CAST does (pybroker.core.tsql.expressions), where DuckDB's CAST of a BLOB would
    write its bytes as \\x escapes; any other value cast as DuckDB casts it."""
    operand = cast.this
    blob = exp.DataType.build("BLOB")
    return exp.Case(
        ifs=[exp.If(this=exp.Anonymous(this="typeof", expressions=[operand.copy()]).eq(
                        exp.Literal.string("BLOB")),
                    true=exp.Anonymous(this="decode", expressions=[
                        exp.Cast(this=operand.copy(), to=blob)]))],
        default=exp.Cast(this=operand.copy(), to=cast.to.copy()))


def _duckdb_type(data_type: exp.DataType) -> None:
    """SQL Server's types as DuckDB holds them: NVARCHAR(MAX) and the like without a length;
    XML and SYSNAME as text; FLOAT (FLOAT(53) unless n <= 24) as DOUBLE, where sqlglot
    would write REAL; MONEY as DECIMAL(19, 4); IMAGE as BLOB."""
    kind = data_type.this
    if any(p.name.upper() == "MAX" for p in data_type.expressions):
        data_type.set("expressions", [])
    if kind == exp.DataType.Type.FLOAT:
        bits = data_type.expressions[0].name if data_type.expressions else "53"
        single = bits.isdigit() and int(bits) <= 24
        data_type.set("this", exp.DataType.Type.FLOAT if single else exp.DataType.Type.DOUBLE)
        data_type.set("expressions", [])
    elif kind in _TYPES_AS:
        data_type.replace(exp.DataType.build(_TYPES_AS[kind]))
    elif kind == exp.DataType.Type.USERDEFINED and str(data_type.args.get("kind")).upper() == (
            "SYSNAME"):
        data_type.replace(exp.DataType.build("VARCHAR"))
