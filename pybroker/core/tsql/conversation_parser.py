"""The conversation statements of a T-SQL batch, as SQL Server writes them: DECLARE, SET
and SELECT of variables, BEGIN DIALOG, SEND, RECEIVE, WAITFOR (RECEIVE | GET CONVERSATION
GROUP), GET CONVERSATION GROUP, END CONVERSATION, BEGIN CONVERSATION TIMER, MOVE
CONVERSATION and BEGIN/COMMIT/ROLLBACK TRANSACTION, mixed with the DDL of
pybroker.core.tsql.batch, PRINT and SET NOCOUNT; the control flow around them
(pybroker.core.tsql.control_flow: blocks, IF, WHILE, TRY ... CATCH, THROW, RAISERROR) and
stored procedures (pybroker.core.tsql.procedure_parser: CREATE/ALTER/DROP PROCEDURE, EXEC).

``parse_script`` reads the whole batch before anything runs, so a statement that is not
understood changes nothing (pybroker.core.tsql.script runs what it returns). Variables must be
declared before they are used, and a variable is declared once per batch, as in SQL Server.

``batches.parse_batches`` first splits a script into batches where a line holds only GO (with an
optional count, GO 3, and an optional -- comment), as sqlcmd and SSMS split it, and parses
every batch before any runs; each batch has its own variables.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Union

from pybroker.core.tsql import control_flow
from pybroker.core.tsql.batch import Statement, ddl_grammar, ddl_parser
from pybroker.core.tsql.control_flow import (
    CONTROL_FLOW,
    Block,
    Break,
    Continue,
    If,
    Raiserror,
    Return,
    Throw,
    TryCatch,
    While,
)
from pybroker.core.tsql.database_statements import (
    DATABASE_SCRIPT_STATEMENTS,
    SYSTEM_DATABASES,
    Use,
    read_use,
)
from pybroker.core.tsql.expressions import (
    RECEIVE_COLUMNS,
    Column,
    Expression,
    is_variable,
    parse_expression,
    parse_type,
    variable_key,
)
from pybroker.core.tsql.lexer import Token, tokenize
from pybroker.core.tsql.object_parser import queue_name
from pybroker.core.tsql.ordinary_sql import read_statement, source_text, starts_ordinary_sql
from pybroker.core.tsql.ordinary_sql_statement import OrdinarySql
from pybroker.core.tsql.parser import Parser
from pybroker.core.tsql.procedure_parser import (
    PROCEDURE_STATEMENTS,
    CreateProcedure,
    DropProcedure,
    Execute,
    ExecuteDynamic,
    read_execute,
    read_procedure_statement,
    starts_procedure_statement,
)
from pybroker.core.tsql.values import SqlType
from pybroker.errors import CatalogInTsqlError, TsqlSyntaxError, UnsupportedStatementError

# -- the statements -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Declare:
    """DECLARE @v type [= value], ... or DECLARE @t TABLE (column type, ...)."""

    variables: tuple[tuple[str, SqlType, Expression | None], ...]
    # a table variable: its name, its columns and their types
    table: tuple[str, tuple[str, ...], tuple[SqlType, ...]] | None
    token: Token


@dataclass(frozen=True, slots=True)
class Assign:
    """SET @v = value, or SELECT @v = value, ... (``targets`` in order)."""

    targets: tuple[tuple[str, Expression], ...]
    token: Token


@dataclass(frozen=True, slots=True)
class Select:
    """SELECT value [AS name], ... (one row), or SELECT columns FROM @table."""

    items: tuple[tuple[str, Expression], ...]  # (column name, expression)
    table: str | None
    table_columns: tuple[str, ...] | None  # None: all (SELECT * FROM @t)
    token: Token


@dataclass(frozen=True, slots=True)
class BeginDialog:
    handle: str  # the variable that receives the new conversation handle
    from_service: str
    to_service: Expression
    broker_instance: Expression | None
    contract: str
    related_conversation: Expression | None
    related_group: Expression | None
    lifetime: Expression | None
    token: Token


@dataclass(frozen=True, slots=True)
class Send:
    handles: tuple[Expression, ...]
    message_type: str
    body: Expression | None
    token: Token


@dataclass(frozen=True, slots=True)
class Receive:
    """RECEIVE, alone or in WAITFOR. ``items`` are (variable or None, column name,
    expression): with variables, RECEIVE assigns (from its last row) and returns nothing."""

    top: Expression | None
    items: tuple[tuple[str | None, str, Expression], ...]
    queue: str
    into: str | None
    where: tuple[str, Expression] | None  # (conversation_handle | conversation_group_id, value)
    timeout: Expression | None  # WAITFOR's TIMEOUT in milliseconds; None: not in WAITFOR
    waits: bool
    token: Token


@dataclass(frozen=True, slots=True)
class GetConversationGroup:
    group: str  # the variable
    queue: str
    timeout: Expression | None
    waits: bool
    token: Token


@dataclass(frozen=True, slots=True)
class EndConversation:
    handle: Expression
    error: Expression | None
    description: Expression | None
    cleanup: bool
    token: Token


@dataclass(frozen=True, slots=True)
class BeginTimer:
    handle: Expression
    timeout: Expression  # seconds
    token: Token


@dataclass(frozen=True, slots=True)
class MoveConversation:
    handle: Expression
    group: Expression
    token: Token


@dataclass(frozen=True, slots=True)
class Transaction:
    action: str  # BEGIN, COMMIT or ROLLBACK
    token: Token


@dataclass(frozen=True, slots=True)
class Print:
    expression: Expression
    token: Token


@dataclass(frozen=True, slots=True)
class SetOption:
    """SET NOCOUNT ON|OFF or SET XACT_ABORT ON: accepted, nothing to change (a batch
    counts no rows aloud, and a failed statement always stops it)."""

    option: str
    on: bool
    token: Token


ConversationStatement = Union[  # noqa: UP007 (a runtime alias)
    Declare, Assign, Select, BeginDialog, Send, Receive, GetConversationGroup,
    EndConversation, BeginTimer, MoveConversation, Transaction, Print, SetOption, Block, If,
    While, Break, Continue, Return, TryCatch, Throw, Raiserror, CreateProcedure,
    DropProcedure, Execute, ExecuteDynamic, OrdinarySql, Use,
]
ScriptStatement = Union[Statement, ConversationStatement]  # noqa: UP007

CONVERSATION_STATEMENTS = (
    "DECLARE, SET, SELECT of values and variables, BEGIN DIALOG, SEND, RECEIVE, WAITFOR "
    "(RECEIVE | GET CONVERSATION GROUP), GET CONVERSATION GROUP, END CONVERSATION, BEGIN "
    "CONVERSATION TIMER, MOVE CONVERSATION, BEGIN/COMMIT/ROLLBACK TRANSACTION, BEGIN ... "
    "END, IF ... ELSE, WHILE, BREAK, CONTINUE, RETURN, BEGIN TRY ... END CATCH, THROW, "
    "RAISERROR, PRINT, SET NOCOUNT, CREATE/ALTER/DROP PROCEDURE, EXEC, and SELECT, INSERT, "
    "UPDATE, DELETE, CREATE TABLE and DROP TABLE"
)
_VERBS = ("DECLARE", "SET", "SELECT", "BEGIN", "SEND", "RECEIVE", "WAITFOR", "GET", "END",
          "MOVE", "COMMIT", "ROLLBACK", "IF", "WHILE", "BREAK", "CONTINUE", "RETURN", "PRINT",
          "ELSE", "THROW", "RAISERROR", "EXEC", "EXECUTE")
_SET_OPTIONS = ("NOCOUNT", "XACT_ABORT")
_DIALOG_OPTIONS = ("RELATED_CONVERSATION", "RELATED_CONVERSATION_GROUP", "LIFETIME",
                   "ENCRYPTION")


def _reads_a_table(expected: TsqlSyntaxError) -> CatalogInTsqlError:
    return CatalogInTsqlError(str(expected))


def is_conversation_statement(statement: object) -> bool:
    return isinstance(statement, (Declare, Assign, Select, BeginDialog, Send, Receive,
                                  GetConversationGroup, EndConversation, BeginTimer,
                                  MoveConversation, Transaction, Print, SetOption,
                                  OrdinarySql, *CONTROL_FLOW, *PROCEDURE_STATEMENTS,
                                  *DATABASE_SCRIPT_STATEMENTS))


def declarations(statements: Sequence[object]) -> Iterator[Declare]:
    """Every DECLARE of the statements, in blocks, IF, WHILE, TRY and CATCH too, in order."""
    return control_flow.declarations(statements, Declare)


def parse_script(text: str, *, master: bool = False, declared: Sequence[str] = ()
                 ) -> list[ScriptStatement]:
    """Parse a batch of DDL (pybroker.core.tsql.batch) and conversation statements, in order,
    without running anything. Raises TsqlSyntaxError (UnsupportedStatementError for a
    statement kind pybroker does not run) with the line and column and what was expected.
    GO is refused here: ``batches.parse_batches`` splits a script into batches at it. ``declared``:
    the variables (by key) the batch finds declared, as sp_executesql's parameters are."""
    if not isinstance(text, str):
        raise TsqlSyntaxError(f"T-SQL must be text, not {type(text).__name__}")
    return parse_tokens(tokenize(text), master, text.removeprefix("\ufeff").split("\n"),
                         declared=declared)


def runs_in_master(statements: Sequence[object], master: bool) -> bool:
    """Whether what follows the statements runs in master (after their last USE)."""
    for s in statements:
        if isinstance(s, Use):
            master = s.database.lower() == SYSTEM_DATABASES[0]
    return master


def parse_tokens(tokens: list[Token], master: bool, lines: list[str], *,
                  batches: bool = False, declared: Sequence[str] = ()
                  ) -> list[ScriptStatement]:
    p = ddl_parser(tokens, master=master)
    p.lines = lines  # for the text of ordinary SQL in a condition (EXISTS)
    reader = _Reader(p, batches, lines)
    reader.declared.update(declared)
    statements: list[ScriptStatement] = []
    while True:
        while p.accept(";"):
            pass
        if p.token.kind == "end":
            break
        if starts_procedure_statement(p):
            statements.append(read_procedure_statement(reader, first=not statements))
        elif p.token.is_word("USE"):
            statements.append(read_use(p))
            p.use_grammar(*ddl_grammar(runs_in_master(statements[-1:], master)))
        else:
            statements.append(reader.statement())
        if p.token.kind == "end" or p.accept(";") or p.starts_statement():
            continue
        raise p.expected("';' or the next statement")
    if not statements:
        end = p.token
        raise TsqlSyntaxError(
            f"the batch holds no statement: expected {p.statement_kinds()}, or "
            f"{CONVERSATION_STATEMENTS}, but found {end.describe()} at {end.where}")
    return statements


class _Reader:
    """The conversation grammar over a DDL Parser (whose position it shares), with the
    variables declared so far."""

    def __init__(self, p: Parser[Any], batches: bool, lines: list[str]) -> None:
        self.p = p
        self.batches = batches  # the script was split at GO: any GO left is misplaced
        self.lines = lines  # the script's text, for a procedure's definition
        self.declared: set[str] = set()
        self.tables: dict[str, tuple[str, ...]] = {}
        self.loops = 0  # the WHILE loops around the statement being read
        self.catches = 0  # the CATCH blocks around it
        self.in_procedure = False

    def body(self, parameters: set[str]) -> tuple[ScriptStatement, ...]:
        """A procedure's body: the statements to the end of the batch, with the parameters
        declared and variables of its own."""
        p = self.p
        outer = self.declared, self.tables
        self.declared, self.tables, self.in_procedure = set(parameters), {}, True
        try:
            statements: list[ScriptStatement] = []
            while True:
                while p.accept(";"):
                    pass
                if p.token.kind == "end":
                    return tuple(statements)
                if starts_procedure_statement(p):
                    statements.append(read_procedure_statement(self, first=False))
                else:
                    statements.append(self.statement())
                if p.token.kind == "end" or p.accept(";") or p.starts_statement():
                    continue
                raise p.expected("';' or the next statement")
        finally:
            (self.declared, self.tables), self.in_procedure = outer, False

    def source(self, start: Token, end: Token) -> str:
        """The script's text from ``start`` up to ``end`` (not included)."""
        return source_text(self.lines, start, end)

    def statement(self) -> ScriptStatement:
        p = self.p
        t = p.token
        if t.is_word("GO") and self.batches:
            raise UnsupportedStatementError(
                f"GO at {t.where} is not supported here: GO separates batches only on a line "
                "of its own (GO, or GO count), as sqlcmd and SSMS read it; put it on a line "
                "of its own")
        if starts_procedure_statement(p):
            return read_procedure_statement(self, first=False)
        if t.is_word("USE"):
            raise UnsupportedStatementError(
                f"USE at {t.where} is not supported here: USE switches the database only at "
                "the top level of a batch (not in a block, IF, WHILE, TRY or procedure)")
        if starts_ordinary_sql(p):  # translated by sqlglot (pybroker.core.tsql.ordinary_sql)
            return read_statement(p, self.declared, self.source)
        if not t.is_word(*_VERBS):
            if t.is_word("GO", *p.statement_verbs):
                return p.statement()  # DDL, or GO refused with its own reason
            if t.kind == "word" and p.starts_statement():
                raise UnsupportedStatementError(
                    f"{t.text.upper()} at {t.where} is not supported: {p.supported()}, and "
                    f"the conversation statements {CONVERSATION_STATEMENTS}")
            raise p.expected(f"{p.statement_kinds()}, or {CONVERSATION_STATEMENTS}")
        p.advance()
        verb = t.text.upper()
        if verb == "BEGIN":
            return self._begin(t)
        if verb == "END":
            p.keyword("CONVERSATION", "CONVERSATION after END (END CONVERSATION @handle), "
                      "or a BEGIN before this END")
            return self._end_conversation(t)
        if verb == "ELSE":
            raise TsqlSyntaxError(
                f"ELSE at {t.where} follows no IF: expected IF <condition> <statement> "
                "before it (an IF takes one statement: put several in BEGIN ... END)")
        if verb in ("BREAK", "CONTINUE"):
            return control_flow.read_break(self, t)
        if verb == "RETURN":
            return control_flow.read_return(self, t)
        if verb == "THROW":
            return control_flow.read_throw(self, t)
        if verb == "RAISERROR":
            return control_flow.read_raiserror(self, t)
        if verb in ("EXEC", "EXECUTE"):
            return read_execute(self, t)
        if verb == "PRINT":
            return Print(self.expression(), t)
        if verb in ("IF", "WHILE"):
            with p.nested(t):
                return control_flow.read_if_or_while(self, t)
        if verb == "MOVE":
            p.keyword("CONVERSATION", "CONVERSATION after MOVE (MOVE CONVERSATION @handle TO "
                      "@group)")
            handle = self.expression()
            p.keyword("TO", "TO and a conversation group after the conversation handle")
            return MoveConversation(handle, self.expression(), t)
        if verb in ("COMMIT", "ROLLBACK"):
            if p.token.is_word("TRAN", "TRANSACTION", "WORK"):
                word = p.advance()
                if word.text.upper() != "WORK" and p.token.kind in ("word", "identifier") and (
                        not p.starts_statement()):
                    p.advance()  # the transaction's name: one transaction at a time here
            return Transaction(verb, t)
        return getattr(self, f"_{verb.lower()}")(t)

    # -- variables ------------------------------------------------------------------------

    def _variable(self, what: str, *, declared: bool = True) -> str:
        t = self.p.token
        if not is_variable(t):
            raise self.p.expected(what)
        if declared and variable_key(t.text) not in self.declared:
            raise TsqlSyntaxError(
                f"the variable {t.text} at {t.where} is not declared: expected DECLARE "
                f"{t.text} <type> before it is used")
        self.p.advance()
        return t.text

    def expression(self, *, columns: bool = False) -> Expression:
        return parse_expression(self.p, self.declared, columns=columns)

    def _declare(self, t: Token) -> Declare:
        p = self.p
        variables: list[tuple[str, SqlType, Expression | None]] = []
        while True:
            name_token = p.token
            name = self._variable("a @variable to declare", declared=False)
            key = variable_key(name)
            if key in self.declared:
                raise TsqlSyntaxError(
                    f"the variable {name} at {name_token.where} is already declared in this "
                    "batch: expected a new name (a variable is declared once per batch)")
            if p.token.is_word("AS"):
                p.advance()
            if p.token.is_word("TABLE"):
                if variables:
                    raise p.expected("a scalar type (a table variable is declared alone)")
                p.advance()
                columns, types = self._table_columns()
                self.declared.add(key)
                self.tables[key] = columns
                return Declare((), (name, columns, types), t)
            sql_type = parse_type(p)
            initial = None
            if p.accept("="):
                initial = self.expression()
            self.declared.add(key)
            variables.append((name, sql_type, initial))
            if not p.accept(","):
                return Declare(tuple(variables), None, t)

    def _table_columns(self) -> tuple[tuple[str, ...], tuple[SqlType, ...]]:
        """(column type [NULL | NOT NULL], ...) of DECLARE @t TABLE: the names and types
        (a value put in a column is converted to its type)."""
        p = self.p
        p.require("(", "'(' and the columns of the table variable")
        names: list[str] = []
        types: list[SqlType] = []
        while True:
            column = p.name("a column name of the table variable")
            if column.lower() in names:
                raise p.expected(f"a column other than {column} (it is named twice)")
            names.append(column.lower())
            types.append(parse_type(p))
            if p.token.is_word("NULL"):
                p.advance()
            elif p.token.is_word("NOT"):
                p.advance()
                p.keyword("NULL", "NULL after NOT")
            if not p.accept(","):
                break
        p.require(")", "',' or ')' after a column of the table variable")
        return tuple(names), tuple(types)

    def _set(self, t: Token) -> Assign | SetOption:
        p = self.p
        if p.token.is_word(*_SET_OPTIONS):
            option = p.advance().text.upper()
            value = p.token
            on = p.choice(f"ON or OFF after SET {option}", "ON", "OFF") == "ON"
            if option == "XACT_ABORT" and not on:
                raise TsqlSyntaxError(
                    f"SET XACT_ABORT OFF at {value.where} is not supported: a failed "
                    "statement always stops the batch and rolls back its transaction here "
                    "(SET XACT_ABORT ON)")
            return SetOption(option, on, t)
        name = self._variable("a @variable after SET (of the SET options only NOCOUNT and "
                              "XACT_ABORT ON are supported)")
        self.p.require("=", f"'=' after SET {name}")
        return Assign(((name, self.expression()),), t)

    def _select(self, t: Token) -> Assign | Select:
        p = self.p
        if p.token.is_symbol("*") or (p.token.kind in ("word", "identifier") and not (
                is_variable(p.token)) and (p.tokens[p.pos + 1].is_word("FROM")
                                           or p.tokens[p.pos + 1].is_symbol(","))
                and not p.token.is_word("NULL")):
            return self._select_from_table(t)
        if is_variable(p.token) and p.tokens[p.pos + 1].is_symbol("="):
            targets: list[tuple[str, Expression]] = []
            while True:
                name = self._variable("a @variable to assign (SELECT @v = value, ...)")
                p.require("=", f"'=' after {name} (SELECT assigns or returns, not both)")
                targets.append((name, self.expression()))
                if not p.accept(","):
                    break
            self._refuse_from()
            return Assign(tuple(targets), t)
        items: list[tuple[str, Expression]] = []
        while True:
            expression = self.expression()
            items.append((self._alias(expression), expression))
            if not p.accept(","):
                break
        self._refuse_from()
        return Select(tuple(items), None, None, t)

    def _select_from_table(self, t: Token) -> Select:
        p = self.p
        wanted: list[str] | None = None
        if not p.accept("*"):
            wanted = []
            while True:
                wanted.append(p.name("a column of the table variable").lower())
                if not p.accept(","):
                    break
        p.keyword("FROM", "FROM @table_variable")
        name_token = p.token
        if not is_variable(name_token):
            raise _reads_a_table(p.expected("a table variable (SELECT ... FROM @table)"))
        table = self._variable("a table variable (SELECT ... FROM @table)")
        columns = self.tables.get(variable_key(table))
        if columns is None:
            raise TsqlSyntaxError(
                f"{table} at {name_token.where} is not a table variable: expected one "
                f"declared as DECLARE {table} TABLE (...)")
        for column in wanted or ():
            if column not in columns:
                raise TsqlSyntaxError(
                    f"the column {column} at {t.where} is not a column of {table}; its "
                    f"columns are {', '.join(columns)}")
        return Select((), table, None if wanted is None else tuple(wanted), t)

    def _refuse_from(self) -> None:
        if self.p.token.is_word("FROM", "WHERE"):
            raise _reads_a_table(self.p.expected("';' or the next statement"))

    def _alias(self, expression: Expression) -> str:
        from pybroker.core.tsql.expressions import column_name

        p = self.p
        if p.token.is_word("AS"):
            p.advance()
            if p.token.kind == "string":
                return p.advance().text
            return p.name("a column name after AS")
        return column_name(expression)

    # -- BEGIN ... ----------------------------------------------------------------------

    def _begin(self, t: Token) -> ScriptStatement:
        p = self.p
        if p.token.is_word("TRAN", "TRANSACTION"):
            p.advance()
            if p.token.kind in ("word", "identifier") and not p.starts_statement() and (
                    not p.token.is_word("WITH")):
                p.advance()  # the transaction's name
            if p.token.is_word("WITH"):
                raise p.expected("';' or the next statement",
                                 " (WITH MARK is not supported)")
            return Transaction("BEGIN", t)
        if p.token.is_word("DIALOG"):
            p.advance()
            if p.token.is_word("CONVERSATION"):
                p.advance()
            return self._begin_dialog(t)
        if p.token.is_word("CONVERSATION"):
            p.advance()
            p.keyword("TIMER", "TIMER after BEGIN CONVERSATION (BEGIN CONVERSATION TIMER)")
            p.require("(", "'(' and a conversation handle after BEGIN CONVERSATION TIMER")
            handle = self.expression()
            p.require(")", "')' after the conversation handle")
            p.keyword("TIMEOUT", "TIMEOUT = seconds")
            p.require("=", "'=' after TIMEOUT")
            return BeginTimer(handle, self.expression(), t)
        if p.token.is_word("TRY"):
            p.advance()
            return control_flow.read_try_catch(self, t)
        if p.token.is_word("CATCH"):
            raise TsqlSyntaxError(
                f"BEGIN CATCH at {t.where} follows no END TRY: expected BEGIN TRY ... END TRY "
                "right before it")
        if p.token.is_word("DISTRIBUTED", "ATOMIC"):
            word = p.token.text.upper()
            raise UnsupportedStatementError(
                f"BEGIN {word} at {t.where} is not supported: {word} transactions are not; a "
                f"batch runs {CONVERSATION_STATEMENTS}")
        return control_flow.read_block(self, t)

    def _begin_dialog(self, t: Token) -> BeginDialog:
        p = self.p
        handle = self._variable("a @variable for the new conversation handle")
        p.keyword("FROM", "FROM SERVICE")
        p.keyword("SERVICE", "SERVICE after FROM")
        from_service = p.name("the initiating service's name")
        p.keyword("TO", "TO SERVICE 'name'")
        p.keyword("SERVICE", "SERVICE after TO")
        to_service = self.expression()
        broker_instance = None
        if p.accept(","):
            broker_instance = self.expression()
        contract = "DEFAULT"
        if p.token.is_word("ON"):
            p.advance()
            p.keyword("CONTRACT", "CONTRACT after ON")
            contract = p.name("a contract name ([DEFAULT] for the default contract)")
        options: dict[str, Expression | None] = {}
        seen: dict[str, Token] = {}
        if p.token.is_word("WITH"):
            p.advance()
            while True:
                option = p.token
                word = p.choice("RELATED_CONVERSATION, RELATED_CONVERSATION_GROUP, LIFETIME "
                                "or ENCRYPTION", *_DIALOG_OPTIONS)
                p.once(word, option, seen, "option of BEGIN DIALOG")
                p.require("=", f"'=' after {word}")
                if word == "ENCRYPTION":
                    # Dialog messages are always signed (P6) and encrypted by the endpoint's
                    # TLS when it has it: the setting changes nothing, so either is accepted.
                    p.choice("ON or OFF", "ON", "OFF")
                else:
                    options[word] = self.expression()
                # SQL Server's grammar lets the comma between options go
                if not p.accept(",") and not p.token.is_word(*_DIALOG_OPTIONS):
                    break
            if "RELATED_CONVERSATION" in seen and "RELATED_CONVERSATION_GROUP" in seen:
                raise TsqlSyntaxError(
                    f"RELATED_CONVERSATION and RELATED_CONVERSATION_GROUP at "
                    f"{seen['RELATED_CONVERSATION_GROUP'].where}: expected one of them")
        return BeginDialog(handle, from_service, to_service, broker_instance, contract,
                           options.get("RELATED_CONVERSATION"),
                           options.get("RELATED_CONVERSATION_GROUP"),
                           options.get("LIFETIME"), t)

    # -- SEND, END CONVERSATION -----------------------------------------------------------

    def _send(self, t: Token) -> Send:
        p = self.p
        p.keyword("ON", "ON CONVERSATION after SEND")
        p.keyword("CONVERSATION", "CONVERSATION after SEND ON")
        parenthesized = p.accept("(")
        handles = [self.expression()]
        while p.accept(","):
            handles.append(self.expression())
        if parenthesized:
            p.require(")", "')' after the conversation handles")
        message_type = "DEFAULT"
        if p.token.is_word("MESSAGE"):
            p.advance()
            p.keyword("TYPE", "TYPE after MESSAGE")
            message_type = p.name("a message type name")
        body = None
        if p.accept("("):
            body = self.expression()
            p.require(")", "')' after the message body")
        return Send(tuple(handles), message_type, body, t)

    def _end_conversation(self, t: Token) -> EndConversation:
        p = self.p
        handle = self.expression()
        if not p.token.is_word("WITH"):
            return EndConversation(handle, None, None, False, t)
        p.advance()
        if p.token.is_word("CLEANUP"):
            p.advance()
            return EndConversation(handle, None, None, True, t)
        p.keyword("ERROR", "ERROR = code DESCRIPTION = 'text' or CLEANUP after WITH")
        p.require("=", "'=' after ERROR")
        error = self.expression()
        p.keyword("DESCRIPTION", "DESCRIPTION = 'text' after the error code")
        p.require("=", "'=' after DESCRIPTION")
        return EndConversation(handle, error, self.expression(), False, t)

    # -- RECEIVE, GET CONVERSATION GROUP, WAITFOR ---------------------------------------

    def _waitfor(self, t: Token) -> Receive | GetConversationGroup:
        p = self.p
        if not p.accept("("):
            raise p.expected("'(' and RECEIVE or GET CONVERSATION GROUP after WAITFOR",
                             " (WAITFOR DELAY and WAITFOR TIME are not supported)")
        inner = p.token
        if inner.is_word("RECEIVE"):
            p.advance()
            statement: Receive | GetConversationGroup = self._receive(inner, waits=True)
        elif inner.is_word("GET"):
            p.advance()
            statement = self._get(inner, waits=True)
        else:
            raise p.expected("RECEIVE or GET CONVERSATION GROUP inside WAITFOR (...)")
        p.require(")", "')' to close WAITFOR (")
        timeout = None
        if p.accept(","):
            p.keyword("TIMEOUT", "TIMEOUT milliseconds after WAITFOR (...),")
            timeout = self.expression()
        if isinstance(statement, Receive):
            return Receive(statement.top, statement.items, statement.queue, statement.into,
                           statement.where, timeout, True, t)
        return GetConversationGroup(statement.group, statement.queue, timeout, True, t)

    def _get(self, t: Token, *, waits: bool = False) -> GetConversationGroup:
        p = self.p
        p.keyword("CONVERSATION", "CONVERSATION GROUP after GET")
        p.keyword("GROUP", "GROUP after GET CONVERSATION")
        group = self._variable("a @variable for the conversation group")
        p.keyword("FROM", "FROM queue")
        return GetConversationGroup(group, queue_name(p), None, waits, t)

    def _receive(self, t: Token, *, waits: bool = False) -> Receive:
        p = self.p
        top = None
        if p.token.is_word("TOP"):
            p.advance()
            if p.accept("("):
                top = self.expression()
                p.require(")", "')' after TOP (n")
            else:
                top = self.expression()
        items: list[tuple[str | None, str, Expression]] = []
        if p.accept("*"):
            items = [(None, c, Column(c, t)) for c in RECEIVE_COLUMNS]
        else:
            while True:
                target = None
                if is_variable(p.token) and p.tokens[p.pos + 1].is_symbol("="):
                    target = self._variable("a @variable to assign")
                    p.advance()
                expression = self.expression(columns=True)
                name = target or self._alias(expression)
                items.append((target, name, expression))
                if not p.accept(","):
                    break
            assigned = [item[0] is not None for item in items]
            if any(assigned) and not all(assigned):
                raise TsqlSyntaxError(
                    f"RECEIVE at {t.where} both assigns variables and returns columns: "
                    "expected one or the other (@v = column for every item, or none)")
        p.keyword("FROM", "FROM queue after the RECEIVE columns")
        queue = queue_name(p)
        into = None
        if p.token.is_word("INTO"):
            p.advance()
            into_token = p.token
            into = self._variable("a table variable after INTO")
            columns = self.tables.get(variable_key(into))
            if columns is None:
                raise TsqlSyntaxError(
                    f"{into} at {into_token.where} is not a table variable: expected one "
                    f"declared as DECLARE {into} TABLE (...)")
            if len(columns) != len(items):
                raise TsqlSyntaxError(
                    f"RECEIVE at {t.where} returns {len(items)} columns but {into} has "
                    f"{len(columns)}: expected as many columns as the table variable")
            if items[0][0] is not None:
                raise TsqlSyntaxError(
                    f"RECEIVE at {t.where} assigns variables and fills {into}: expected one "
                    "or the other")
        where = None
        if p.token.is_word("WHERE"):
            p.advance()
            column = p.choice("conversation_handle or conversation_group_id after WHERE",
                              "CONVERSATION_HANDLE", "CONVERSATION_GROUP_ID")
            p.require("=", f"'=' after {column.lower()}")
            where = (column.lower(), self.expression())
        return Receive(top, tuple(items), queue, into, where, None, waits, t)
