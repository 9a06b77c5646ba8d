"""Running a batch of T-SQL conversation statements (pybroker.core.tsql.conversation_parser) on a
Database, in order, with its variables, the way SQL Server runs a script. Every verb goes
through the public API (``Database.begin_dialog``, ``Conversation.send``/``end``/
``begin_timer``/``move_to``, ``Database.receive``, ``Database.get_conversation_group``,
``Database.transaction``), so a batch does exactly what the same calls from Python do.

**Chosen where SQL Server leaves a choice** (the README says the same):

- The whole batch is parsed before anything runs: a statement that is not understood, or a
  variable used before it is declared, runs nothing of the batch.
- Outside BEGIN TRANSACTION each statement commits on its own (SQL Server's autocommit);
  between BEGIN TRANSACTION and COMMIT everything commits together. Transactions nest as
  @@TRANCOUNT does: only the outermost COMMIT commits, and ROLLBACK rolls back everything.
- A statement that fails stops the batch (as with SET XACT_ABORT ON): an open transaction
  is rolled back; what earlier statements committed stays. The error is the API's own,
  its message prefixed with the statement and its place; the result sets returned before
  it are on the error as ``results``.
- A batch that ends inside BEGIN TRANSACTION is rolled back, with a TransactionError.
- A batch of DDL only (no conversation statement) stays all or nothing.
- A script is split into batches at each line holding only GO [count], as sqlcmd and SSMS
  split it (pybroker.core.tsql.batches.parse_batches). Every batch is parsed before
  the first runs, then they run in order, each on its own: variables do not cross GO, and
  neither does a transaction (a batch that ends inside one is rolled back, as above).
  GO count runs the batch before it that many times. A failed batch stops the script
  (as sqlcmd -b does): what the batches before it did stays, and the error says how many
  ran; the result sets of the whole script returned before it are on it as ``results``.
- Control flow (BEGIN ... END, IF, WHILE, BREAK, CONTINUE, RETURN) runs here over the parsed
  statements; a condition is True, False or UNKNOWN, and only True runs a branch or a loop's
  body. A WHILE has no bound of its own, as in SQL Server. RETURN ends the batch.
- What a script returns is a ``BatchResults``: the result sets (it is their list) and the
  lines PRINT wrote, on ``messages``; a failed batch's error carries one as ``results``.
- @@ROWCOUNT is the rows the last RECEIVE or SELECT returned or assigned, 1 after SET, and
  0 after any other statement (SQL Server's documentation does not say what SEND, BEGIN
  DIALOG or END CONVERSATION leave); DECLARE and control flow leave it as it was; after EXEC
  it is what the procedure's last statement left.
- An error in a TRY block (or in a procedure it calls) runs the CATCH block and does not
  roll back: an open transaction is left uncommittable (XACT_STATE() -1), as SET
  XACT_ABORT ON leaves it in SQL Server, and until ROLLBACK only statements that write
  nothing run. The ERROR_ functions tell of the error the innermost CATCH block handles;
  its number is SQL Server's for the same failure (pybroker.core.tsql.error_numbers).
- EXEC runs a procedure's body in the caller's transaction, results and messages, with
  variables of its own; its text is parsed again from what CREATE kept (cached), so the
  lines of its errors count from its CREATE line. An error it does not catch stops the
  batch and says "Msg n, Level l, State s, Procedure schema.name, Line n" before the
  statement that failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pybroker import arguments
from pybroker.core.tsql import control_flow as cf
from pybroker.core.tsql import conversation_parser as cp
from pybroker.core.tsql import database_statements as dbs
from pybroker.core.tsql import dynamic_sql as dyn
from pybroker.core.tsql import procedure_calls as calls
from pybroker.core.tsql.batch_interface import (
    BatchDatabase,
    BatchResults,
    ResultSet,
)
from pybroker.core.tsql.error_numbers import (
    SEVERITY,
    USER_ERROR,
    ErrorInfo,
    TsqlError,
    classify,
)
from pybroker.core.tsql.expressions import (
    RECEIVE_COLUMNS,
    Condition,
    evaluate,
    evaluate_condition,
    variable_key,
)
from pybroker.core.tsql.failures import failed_statement
from pybroker.core.tsql.lexer import Token
from pybroker.core.tsql.ordinary_sql import render
from pybroker.core.tsql.ordinary_sql_statement import (
    TEXT_TYPE_NAMES,
    OrdinarySql,
    Rendered,
    TableVariable,
    bound,
    value_of,
)
from pybroker.core.tsql.procedure_parser import (
    CreateProcedure,
    DropProcedure,
    Execute,
    ExecuteDynamic,
    Parameter,
)
from pybroker.core.tsql.values import (
    SqlType,
    Value,
    as_body,
    as_guid,
    as_text,
    as_whole_number,
    convert,
    plain,
)
from pybroker.errors import (
    BrokerError,
    InstanceClosedError,
    InvalidArgumentError,
    TransactionError,
)

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.conversation.model import Message


_INT32_MAX = 2**31 - 1
_ACTIVATION_TOKEN = Token("word", "EXEC", 1, 1)
_CURRENT_DATABASE = "CURRENT DATABASE"  # BEGIN DIALOG's broker_instance for this database


# What ends the statements of a block early: BREAK, CONTINUE or RETURN.
_BREAK, _CONTINUE, _RETURN = "BREAK", "CONTINUE", "RETURN"
_SIGNALS = {cp.Break: _BREAK, cp.Continue: _CONTINUE, cp.Return: _RETURN}


@dataclass(slots=True)
class _Session:
    """What a batch and the procedures it calls share, beside its results and transactions."""

    trying: int = 0  # the TRY blocks running around the statement running
    doomed: bool = False  # an error in a TRY block left the transaction uncommittable
    handling: list[tuple[BaseException, ErrorInfo]] = field(default_factory=list)  # CATCH
    depth: int = 0  # procedures called within procedures (@@NESTLEVEL)


class _Run:
    """One batch, or one call of a procedure (``caller``: the run that called it, whose
    results, transactions and session it shares; ``procedure``: its schema.name)."""

    def __init__(self, database: BatchDatabase, caller: _Run | None = None,
                 procedure: str | None = None,
                 databases: dbs.ScriptDatabases | None = None) -> None:
        self.db = database  # USE switches it
        self.databases = databases if caller is None else caller.databases
        self.variables: dict[str, tuple[SqlType | None, Any]] = {}
        self.results = BatchResults() if caller is None else caller.results
        self.transactions: list[tuple[AbstractContextManager[Any], cp.Transaction]] = (
            [] if caller is None else caller.transactions)
        self.session = _Session() if caller is None else caller.session
        self.procedure = procedure
        self.dynamic: str | None = None  # dynamic SQL: where the EXEC that runs it is
        self._validations: dict[str, str] | None = None
        self.ran = 0  # statements run so far
        self.rowcount = 0  # @@ROWCOUNT: the rows the last statement returned or assigned
        self.counted = 0  # what the statement running sets @@ROWCOUNT to
        self.error = 0  # @@ERROR: the number of the error a CATCH block's first statement sees
        self.return_code = 0  # RETURN n of a procedure
        # @@SPID: the session's number, the batch's first database's (USE keeps it); asked
        # of it when a statement first runs
        self.session_database = database if caller is None else caller.session_database
        self.session_id: int | None = None if caller is None else caller.session_id
        self.variables["EXISTS()"] = (None, lambda query: bool(self.run_sql(query)[1]))
        self.variables["OBJECT_ID()"] = (None, self.object_id)

    # -- the batch ----------------------------------------------------------------------

    def declare_all(self, statements: Sequence[cp.ScriptStatement]) -> None:
        for declare in cp.declarations(statements):  # a variable lives for the whole batch
            for name, sql_type, _ in declare.variables:
                self.variables[variable_key(name)] = (sql_type, None)
            if declare.table is not None:
                name, columns, types = declare.table
                self.variables[variable_key(name)] = (None, TableVariable(columns, types, []))

    def run(self, statements: Sequence[cp.ScriptStatement]) -> BatchResults:
        self.declare_all(statements)
        try:
            self.block(statements)
        except BaseException:
            self._roll_back_all()
            raise
        if self.transactions:
            begun = self.transactions[0][1].token
            self._roll_back_all()
            error = TransactionError(
                f"the batch ended inside the transaction begun at {begun.where}: it was "
                "rolled back; end it with COMMIT (or ROLLBACK) in the same batch")
            error.results = self._returned()  # type: ignore[attr-defined]
            raise error
        return self.results

    def block(self, statements: Iterable[cp.ScriptStatement]) -> str | None:
        """Run statements in order; BREAK, CONTINUE or RETURN ends them early and is
        returned, for the WHILE (or the batch) around them."""
        for s in statements:
            signal = self.statement(s)
            if signal is not None:
                return signal
        return None

    def statement(self, s: cp.ScriptStatement) -> str | None:
        if isinstance(s, cp.Block):
            return self.block(s.statements)
        if isinstance(s, cp.If):
            branch = s.then if self.test(s.condition, s) else s.otherwise
            return None if branch is None else self.statement(branch)
        if isinstance(s, cp.While):
            while self.test(s.condition, s):
                signal = self.statement(s.body)
                if signal == _BREAK:
                    break
                if signal == _RETURN:
                    return signal
            return None
        if isinstance(s, cp.TryCatch):
            return self.try_catch(s)
        if isinstance(s, cp.Return) and s.value is not None:
            self.leaf(s)  # the value is worked out as a statement is (it may fail)
        signal = _SIGNALS.get(type(s))
        if signal is not None:
            return signal
        self.leaf(s)
        return None

    def try_catch(self, s: cp.TryCatch) -> str | None:
        """BEGIN TRY ... END CATCH: an error of a statement in the TRY block (or of a
        procedure it calls) runs the CATCH block, with the ERROR_ functions telling of it.
        An open transaction is not rolled back then but left uncommittable (XACT_STATE()
        -1), as SET XACT_ABORT ON leaves it: the CATCH block rolls it back."""
        session = self.session
        session.trying += 1
        try:
            return self.block(s.attempt)
        except BrokerError as exc:
            if isinstance(exc, InstanceClosedError):
                raise
            caught: BrokerError = exc
        finally:
            session.trying -= 1
        info: ErrorInfo = caught.tsql_error  # type: ignore[attr-defined]
        session.handling.append((caught, info))
        self.error = info.number
        try:
            return self.block(s.handler)
        finally:
            session.handling.pop()

    def test(self, condition: Condition, s: cp.If | cp.While) -> bool:
        """The condition of an IF or a WHILE: only True runs the branch (UNKNOWN does not)."""
        try:
            self._system()
            return evaluate_condition(condition, self.variables) is True
        except BaseException as exc:
            self._failed(exc, s)
            raise

    def leaf(self, s: cp.ScriptStatement) -> None:
        """A statement that is no control flow, with @@ROWCOUNT kept as SQL Server keeps it:
        the rows a RECEIVE or SELECT returned or assigned, 1 for SET; 0 for the others."""
        try:
            self._system()
            self.counted = 0
            self.error = 0
            if self.session.doomed and self.transactions and not isinstance(s, _HARMLESS) and (
                    not (isinstance(s, cp.Transaction) and s.action == "ROLLBACK")):
                raise TsqlError(
                    "the current transaction cannot be committed and cannot do any more "
                    "work: an error in a TRY block left it uncommittable; roll it back "
                    "first (ROLLBACK TRANSACTION; XACT_STATE() is -1)", 3930)
            if isinstance(s, cp.Transaction):
                self.transaction(s)
            elif not cp.is_conversation_statement(s):
                self.db.run_statements([s])  # DDL: joins an open transaction
            else:
                getattr(self, _HANDLERS[type(s)])(s)
        except BaseException as exc:
            self._failed(exc, s)
            raise
        self.ran += 1
        if not isinstance(s, cp.Declare):  # DECLARE leaves @@ROWCOUNT as it was
            self.rowcount = self.counted

    def _system(self) -> None:
        """The system variables' values, among the variables (their names begin @@)."""
        self.variables["@@ROWCOUNT"] = (None, self.rowcount)
        self.variables["@@TRANCOUNT"] = (None, len(self.transactions))
        self.variables["@@ERROR"] = (None, self.error)  # a failed statement stops the batch
        if self.session_id is None:
            self.session_id = self.session_database.session_id
        self.variables["@@SPID"] = (None, self.session_id)
        self.variables["NOW()"] = (None, self.db.clock)  # GETDATE() and the others
        self.variables["DB_ID()"] = (None, self.database_id)
        info = self.session.handling[-1][1] if self.session.handling else None
        for name, value in (
                ("ERROR_NUMBER", info and info.number), ("ERROR_MESSAGE", info and info.message),
                ("ERROR_LINE", info and info.line), ("ERROR_PROCEDURE", info and info.procedure),
                ("ERROR_SEVERITY", info and info.severity), ("ERROR_STATE", info and info.state),
                ("XACT_STATE", (-1 if self.session.doomed else 1) if self.transactions else 0)):
            self.variables[f"{name}()"] = (None, value)

    def database_id(self, name: str | None) -> int | None:
        """DB_ID(name): the id of the database of that name (None: the one in use)."""
        if self.databases is None:
            raise TsqlError("DB_ID() names databases only in a script of Database.execute() "
                            "or Instance.execute()")
        return self.databases.database_id(self.db.name if name is None else name)

    def database_statement(self, s: object) -> None:
        """USE, CREATE, DROP and ALTER DATABASE (pybroker.core.tsql.database_statements)."""
        if self.databases is None:
            raise TsqlError("USE and the DATABASE statements run only in a script of "
                            "Database.execute() or Instance.execute()")
        database = dbs.run_database_statement(self.databases, s, self.db,
                                              bool(self.transactions))
        if database is not self.db:
            self.db, self._validations = database, None

    def _failed(self, exc: BaseException, s: object) -> None:
        """After the statement ``s`` failed with ``exc``: what ERROR_NUMBER() and the
        others tell of it kept on it (``tsql_error``); then, inside a TRY block, the open
        transaction left uncommittable for the CATCH block; outside one, the transaction
        rolled back, ``exc``'s message saying which statement (of which procedure, as
        SQL Server's "Msg n, Level l, State s, Procedure p, Line n" does) and what became of
        the batch, and what the batch returned before it on its ``results``."""
        info: ErrorInfo | None = getattr(exc, "tsql_error", None)
        message = exc.args[0] if isinstance(exc, Exception) and exc.args and isinstance(
            exc.args[0], str) else None
        if info is None and isinstance(exc, BrokerError):
            token = getattr(s, "token", None)
            number, severity, state = classify(exc)
            info = ErrorInfo(number, message or str(exc), severity, state,
                             token.line if token is not None else None, self.procedure)
            exc.tsql_error = info  # type: ignore[attr-defined]
        if self.session.trying and isinstance(exc, BrokerError) and (
                not isinstance(exc, InstanceClosedError)):
            self.session.doomed = self.session.doomed or bool(self.transactions)
            return
        undone = self._roll_back_all()
        if info is not None and info.reported:
            return  # a procedure this statement called said where it failed
        if message is not None:
            text = failed_statement(s, message, self.ran, undone)
            if info is not None and (info.procedure is not None or self.dynamic):
                place = "" if info.procedure is None else f"Procedure {info.procedure}, "
                text = (f"Msg {info.number}, Level {info.severity}, State {info.state}, "
                        f"{place}Line {info.line}: {text}")
            if self.dynamic:
                text = f"{text} (in the dynamic SQL run by EXEC at {self.dynamic})"
            exc.args = (text, *exc.args[1:])  # type: ignore[union-attr]
        if info is not None:
            info.reported = True
        exc.results = self._returned()  # type: ignore[attr-defined]

    def _returned(self) -> BatchResults:
        return BatchResults(self.results, self.results.messages)

    def transaction(self, s: cp.Transaction) -> None:
        if s.action == "BEGIN":
            context = self.db.transaction()
            context.__enter__()
            self.transactions.append((context, s))
            return
        if not self.transactions:
            raise TransactionError(
                "there is no BEGIN TRANSACTION for it to end (each statement outside one "
                "commits on its own)")
        if s.action == "ROLLBACK":
            self._roll_back_all()
            return
        context, _ = self.transactions.pop()
        context.__exit__(None, None, None)  # the outermost one commits

    def _roll_back_all(self) -> bool:
        """Roll back an open transaction (innermost first, as the contexts nest)."""
        undone = bool(self.transactions)
        self.session.doomed = False
        while self.transactions:
            context, _ = self.transactions.pop()
            rollback = _Rollback()
            context.__exit__(_Rollback, rollback, None)
        return undone

    # -- variables ------------------------------------------------------------------------

    def value(self, expression: Any, row: dict[str, Value] | None = None) -> Value:
        return evaluate(expression, self.variables, row)

    def assign(self, name: str, value: Value, where: str) -> None:
        key = variable_key(name)
        declared, _ = self.variables[key]
        self.variables[key] = (declared, convert(value, declared, where) if declared else value)

    def declare(self, s: cp.Declare) -> None:
        """The variables exist from the batch's start (``run``); DECLARE gives those with an
        initial value that value. Without one a variable keeps what it holds, as a DECLARE
        inside a WHILE loop does in SQL Server."""
        for name, _, initial in s.variables:
            if initial is not None:
                self.assign(name, self.value(initial), s.token.where)

    def assign_statement(self, s: cp.Assign) -> None:
        values = [(name, self.value(expression)) for name, expression in s.targets]
        for name, value in values:
            self.assign(name, value, s.token.where)
        self.counted = 1

    def select(self, s: cp.Select) -> None:
        if s.table is None:
            row = tuple(plain(self.value(expression)) for _, expression in s.items)
            self.results.append(ResultSet(tuple(name for name, _ in s.items), [row]))
            self.counted = 1
            return
        table: TableVariable = self.variables[variable_key(s.table)][1]
        wanted = s.table_columns or table.columns
        at = [table.columns.index(c) for c in wanted]
        self.results.append(ResultSet(tuple(wanted), [tuple(plain(r[i]) for i in at)
                                                      for r in table.rows]))
        self.counted = len(table.rows)

    def ordinary_sql(self, s: OrdinarySql) -> None:
        """SELECT, INSERT, UPDATE, DELETE, CREATE and DROP TABLE, translated for DuckDB
        (pybroker.core.tsql.ordinary_sql): a SELECT's rows are a result set, SELECT @v =
        ... assigns the last row's values (none when no row comes back, as in SQL
        Server); @@ROWCOUNT is the rows returned, assigned or changed."""
        rendered, columns, rows = self._run_rendered(s)
        if rendered.into is not None:  # INSERT INTO @t: the rows its query gave
            key, at = rendered.into
            table: TableVariable = self.variables[key][1]
            if rows and len(rows[0]) != len(at):
                raise TsqlError(
                    f"INSERT INTO {key.lower()} at {s.token.where} gives {len(rows[0])} "
                    f"value(s) for {len(at)} column(s): column name or number of supplied "
                    "values does not match table definition", 213)
            for row in rows:
                values: list[Value] = [None] * len(table.columns)
                for index, value in zip(at, row, strict=True):
                    values[index] = value
                table.add(tuple(values), s.token.where)
            self.counted = len(rows)
            return
        if rendered.deletes is not None:  # DELETE FROM @t: the numbers of its rows to go
            table = self.variables[rendered.deletes][1]
            going = {int(row[0]) for row in rows}  # type: ignore[arg-type]
            table.rows[:] = [r for i, r in enumerate(table.rows) if i not in going]
            self.counted = len(going)
            return
        if s.kind in ("INSERT", "UPDATE", "DELETE"):
            self.counted = int(rows[0][0]) if rows else 0
            return
        if s.kind != "SELECT":
            return
        self.counted = len(rows)
        if s.assigns:
            for key, value in zip(s.assigns, rows[-1] if rows else (), strict=False):
                self.assign(key, value, s.token.where)
            return
        self.results.append(ResultSet(tuple(columns),
                                      [tuple(plain(v) for v in row) for row in rows]))

    def run_sql(self, s: OrdinarySql) -> tuple[list[str], list[tuple[Value, ...]]]:
        _, columns, rows = self._run_rendered(s)
        return columns, rows

    def _run_rendered(self, s: OrdinarySql
                      ) -> tuple[Rendered, list[str], list[tuple[Value, ...]]]:
        database = self.db.ordinary_sql()
        texts = frozenset(key for _, key in s.parameters if (
            self.variables[key][0] is not None and self.variables[key][0].name in (
                TEXT_TYPE_NAMES)))
        tables = {key: self.variables[key][1] for key in s.tables}
        for key, table in tables.items():
            if not isinstance(table, TableVariable):
                raise TsqlError(f"{key.lower()} at {s.token.where} is not a table variable: "
                                f"must declare the table variable \"{key.lower()}\"", 1087)
        rendered = render(s, self.db.name, database.names(), texts, tables)
        columns, rows = database.run(rendered, bound(rendered, self.variables))
        return rendered, columns, [tuple(value_of(v) for v in row) for row in rows]

    def object_id(self, name: Value, kind: Value = None) -> int | None:
        """OBJECT_ID(name [, type]): NULL when no such table, procedure or queue exists."""
        if name is None:
            return None
        where = "OBJECT_ID"
        return self.db.ordinary_sql().object_id(
            as_text(name, "OBJECT_ID's name", where),
            None if kind is None else as_text(kind, "OBJECT_ID's type", where))

    def print_statement(self, s: cp.Print) -> None:
        value = self.value(s.expression)
        self.results.messages.append(
            "" if value is None else str(convert(value, SqlType("NVARCHAR"), s.token.where)))

    def set_option(self, s: cp.SetOption) -> None:
        """SET NOCOUNT and SET XACT_ABORT ON change nothing here (cp.SetOption)."""

    # -- errors and procedures ------------------------------------------------------------

    def throw(self, s: cp.Throw) -> None:
        """THROW number, message, state (severity 16); a bare THROW raises again the error
        its CATCH block handles."""
        where = s.token.where
        if s.number is None:
            raise self.session.handling[-1][0]
        number = as_whole_number(self.value(s.number), "THROW's error number", where,
                                 minimum=cf.MIN_THROW_NUMBER, maximum=cf.MAX_ERROR_NUMBER)
        message = as_text(self.value(s.message), "THROW's message", where)
        state = as_whole_number(self.value(s.state), "THROW's state", where, minimum=0,
                                maximum=cf.MAX_STATE)
        raise TsqlError(message, number, SEVERITY, state)

    def raiserror(self, s: cp.Raiserror) -> None:
        """RAISERROR: severity 10 or less is a message (as PRINT writes), 11 to 18 an
        error (number 50000) that a CATCH block catches."""
        where = s.token.where
        text = self.value(s.message)
        if isinstance(text, int):
            raise TsqlError(
                f"RAISERROR at {where} names message {text}: there is no sys.messages to "
                "take it from; expected the message's text", 18054)
        message = as_text(text, "RAISERROR's message", where)
        severity = as_whole_number(self.value(s.severity), "RAISERROR's severity", where,
                                   minimum=0, maximum=cf.MAX_RAISERROR_SEVERITY)
        state = as_whole_number(self.value(s.state), "RAISERROR's state", where, minimum=0,
                                maximum=cf.MAX_STATE)
        message = cf.raiserror_text(message, [self.value(a) for a in s.arguments], where)
        if severity <= 10:
            self.results.messages.append(message)
            return
        raise TsqlError(message, USER_ERROR, severity, state)

    def return_statement(self, s: cp.Return) -> None:
        value = self.value(s.value)  # RETURN NULL returns 0, as in SQL Server
        self.return_code = 0 if value is None else as_whole_number(
            value, "RETURN's value", s.token.where, minimum=-_INT32_MAX - 1,
            maximum=_INT32_MAX)

    def create_procedure(self, s: CreateProcedure) -> None:
        self.db.save_procedure(s.schema, s.name, s.definition, s.mode)

    def drop_procedure(self, s: DropProcedure) -> None:
        for schema, name in s.names:
            self.db.drop_procedure(schema, name, if_exists=s.if_exists)

    def execute(self, s: Execute) -> None:
        """EXEC: the procedure's body runs with its parameters, sharing this batch's
        transaction, results and messages; OUTPUT parameters and RETURN's value come back."""
        if dyn.is_executesql(s):
            self.execute_sql(s)
            return
        where = s.token.where
        shown = ".".join(part for part in (s.database, s.schema, s.name) if part)
        if s.database is not None and s.database.lower() != self.db.name.lower():
            raise TsqlError(
                f"EXEC {shown} names database {s.database}: a procedure runs in the database "
                f"of its batch here ({self.db.name}); run the batch in {s.database}", 2812)
        found = self.db.procedure_definition(s.schema, s.name)
        if found is None:
            raise TsqlError(f"could not find stored procedure '{shown}'", 2812)
        schema, name, definition = found
        procedure = calls.parsed(definition)
        called = f"{schema}.{name}"
        values, outputs = calls.bind(procedure.parameters, s, self.value, called)
        run = self.called(procedure.body, procedure.parameters, values, called, where)
        for key, variable in outputs:
            self.assign(variable, run.variables[key][1], where)
        if s.return_code is not None:
            self.assign(s.return_code, run.return_code, where)
        self.counted = run.rowcount

    def called(self, body: Sequence[cp.ScriptStatement], parameters: Sequence[Parameter],
               values: dict[str, Value], procedure: str | None, where: str) -> _Run:
        """Run a procedure's body (``procedure``: its schema.name), or dynamic SQL (None),
        for the EXEC at ``where``, in a scope of its own, its parameters set to ``values``;
        the run, for what comes back."""
        if self.session.depth >= calls.MAX_NESTING:
            raise TsqlError(f"maximum stored procedure nesting level exceeded (limit "
                            f"{calls.MAX_NESTING}) at {procedure or 'dynamic SQL'}", 217)
        run = _Run(self.db, self, procedure)
        run.dynamic = None if procedure is not None else where
        run.declare_all(body)
        for parameter in parameters:
            run.variables[variable_key(parameter.name)] = (parameter.type, None)
            run.assign(parameter.name, values[variable_key(parameter.name)], where)
        self.session.depth += 1
        try:
            run.block(body)
        finally:
            self.session.depth -= 1
        return run

    def execute_dynamic(self, s: ExecuteDynamic) -> None:
        """EXEC (text): the text runs as a batch of its own (pybroker.core.tsql.dynamic_sql)."""
        where = s.token.where
        body = dyn.parse(self.value(s.text), where, (), self._in_master())
        self.counted = self.called(body, (), {}, None, where).rowcount if body else 0

    def execute_sql(self, s: Execute) -> None:
        """EXEC sp_executesql @stmt, @params, @p = value [OUTPUT], ...: the text runs as a
        batch of its own with the parameters declared, the OUTPUT ones coming back."""
        where = s.token.where
        text, parameters, call = dyn.executesql(s, self.value)
        values, outputs = calls.bind(parameters, call, self.value, dyn.EXECUTESQL)
        body = dyn.parse(text, where, dyn.declared_keys(parameters), self._in_master())
        if not body:
            self.counted = 0
            return
        run = self.called(body, parameters, values, None, where)
        for key, variable in outputs:
            self.assign(variable, run.variables[key][1], where)
        if s.return_code is not None:
            self.assign(s.return_code, 0, where)
        self.counted = run.rowcount

    def _in_master(self) -> bool:
        return self.db.name.lower() == dbs.SYSTEM_DATABASES[0]

    # -- the verbs ----------------------------------------------------------------------

    def begin_dialog(self, s: cp.BeginDialog) -> None:
        where = s.token.where
        to_service = as_text(self.value(s.to_service), "TO SERVICE", where)
        broker_instance = None
        if s.broker_instance is not None:
            broker_instance = as_text(self.value(s.broker_instance), "the broker instance",
                                      where)
            if broker_instance.upper() == _CURRENT_DATABASE:
                broker_instance = self.db.broker_instance
        group = None
        if s.related_conversation is not None:
            related = as_guid(self.value(s.related_conversation), "RELATED_CONVERSATION",
                              where)
            group = self.db.conversation(related).conversation_group_id
        elif s.related_group is not None:
            group = as_guid(self.value(s.related_group), "RELATED_CONVERSATION_GROUP", where)
        lifetime = None
        if s.lifetime is not None:
            lifetime = as_whole_number(self.value(s.lifetime), "LIFETIME", where, minimum=1,
                                       maximum=arguments.MAX_SECONDS)
        conversation = self.db.begin_dialog(
            s.from_service, to_service, contract=s.contract, broker_instance=broker_instance,
            lifetime=lifetime, related_conversation_group=group)
        self.assign(s.handle, conversation.handle, where)

    def send(self, s: cp.Send) -> None:
        where = s.token.where
        handles = [as_guid(self.value(h), "the conversation handle", where)
                   for h in s.handles]
        body = b"" if s.body is None else as_body(self.value(s.body), where)
        if len(handles) == 1:
            self.db.conversation(handles[0]).send(body, message_type=s.message_type)
            return
        with self.db.transaction():  # one statement: on every conversation, or on none
            for handle in handles:
                self.db.conversation(handle).send(body, message_type=s.message_type)

    def end_conversation(self, s: cp.EndConversation) -> None:
        where = s.token.where
        handle = as_guid(self.value(s.handle), "the conversation handle", where)
        error = description = None
        if s.error is not None:
            error = as_whole_number(self.value(s.error), "ERROR", where, minimum=1,
                                    maximum=_INT32_MAX)
            description = as_text(self.value(s.description), "DESCRIPTION", where)
        self.db.conversation(handle).end(error, description, cleanup=s.cleanup)

    def begin_timer(self, s: cp.BeginTimer) -> None:
        where = s.token.where
        handle = as_guid(self.value(s.handle), "the conversation handle", where)
        seconds = as_whole_number(self.value(s.timeout), "TIMEOUT", where, minimum=0,
                                  maximum=arguments.MAX_SECONDS)
        self.db.conversation(handle).begin_timer(seconds)

    def move_conversation(self, s: cp.MoveConversation) -> None:
        where = s.token.where
        handle = as_guid(self.value(s.handle), "the conversation handle", where)
        group = self.value(s.group)
        if group is None:
            raise InvalidArgumentError(
                f"the conversation group at {where} is NULL: expected a conversation group "
                "id (set the variable first, e.g. by GET CONVERSATION GROUP or from "
                "sys.conversation_endpoints)")
        self.db.conversation(handle).move_to(as_guid(group, "the conversation group", where))

    def _timeout(self, s: cp.Receive | cp.GetConversationGroup) -> float:
        """WAITFOR's TIMEOUT in seconds (without one it waits as long as it may, about 68
        years); 0 outside WAITFOR."""
        if not s.waits:
            return 0.0
        if s.timeout is None:
            return float(arguments.MAX_SECONDS)
        ms = as_whole_number(self.value(s.timeout), "TIMEOUT", s.token.where, minimum=0,
                             maximum=_INT32_MAX)
        return ms / 1000

    def get_conversation_group(self, s: cp.GetConversationGroup) -> None:
        group = self.db.get_conversation_group(s.queue, timeout=self._timeout(s))
        self.assign(s.group, group, s.token.where)

    def receive(self, s: cp.Receive) -> None:
        where = s.token.where
        top = _INT32_MAX
        if s.top is not None:
            top = as_whole_number(self.value(s.top), "TOP", where, minimum=1,
                                  maximum=_INT32_MAX)
        handle = group = None
        matches = True
        if s.where is not None:
            column, expression = s.where
            found = self.value(expression)
            matches = found is not None  # WHERE column = NULL keeps no message, as in SQL
            value = as_guid(found, column, where) if matches else None
            handle, group = (value, None) if column == "conversation_handle" else (None, value)
        messages = self.db.receive(
            s.queue, max_messages=top, timeout=self._timeout(s), conversation_handle=handle,
            conversation_group_id=group) if matches else []
        rows = [self._columns(m) for m in messages]
        self.counted = len(rows)
        if s.items and s.items[0][0] is not None:  # RECEIVE @v = column, ...
            for row in rows:
                values = [(target, self.value(e, row)) for target, _, e in s.items]
                for target, column_value in values:
                    self.assign(target, column_value, where)  # type: ignore[arg-type]
            return
        result = ResultSet(tuple(name for _, name, _ in s.items),
                           [tuple(plain(self.value(e, row)) for _, _, e in s.items)
                            for row in rows])
        if s.into is None:
            self.results.append(result)
        else:
            table: TableVariable = self.variables[variable_key(s.into)][1]
            for row in result.rows:
                table.add(row, where)

    def _columns(self, m: Message) -> dict[str, Value]:
        """The RECEIVE columns of a message. pybroker keeps services, contracts and
        message types by name: their ids are NULL."""
        if self._validations is None:
            codes = {"NONE": "N", "EMPTY": "E", "WELL_FORMED_XML": "X"}
            self._validations = {t.name: codes.get(t.validation, "N")
                                 for t in self.db.message_types()}
        row: dict[str, Value] = dict.fromkeys(RECEIVE_COLUMNS)
        row.update(
            status=1, priority=m.priority, queuing_order=m.queuing_order,
            conversation_group_id=m.conversation_group_id,
            conversation_handle=m.conversation_handle,
            message_sequence_number=m.message_sequence_number, service_name=m.service_name,
            service_contract_name=m.service_contract_name,
            message_type_name=m.message_type_name,
            validation=self._validations.get(m.message_type_name, "N"),
            message_body=m.message_body or None)  # an empty body is NULL, as in SQL Server
        return row


# The method of _Run that runs each kind of conversation statement.
_HANDLERS: dict[type, str] = {
    cp.Declare: "declare", cp.Assign: "assign_statement", cp.Select: "select",
    cp.BeginDialog: "begin_dialog", cp.Send: "send", cp.EndConversation: "end_conversation",
    cp.BeginTimer: "begin_timer", cp.GetConversationGroup: "get_conversation_group",
    cp.Receive: "receive", cp.MoveConversation: "move_conversation",
    cp.Print: "print_statement", cp.SetOption: "set_option", cp.Throw: "throw",
    cp.Raiserror: "raiserror", cp.Return: "return_statement",
    CreateProcedure: "create_procedure", DropProcedure: "drop_procedure", Execute: "execute",
    ExecuteDynamic: "execute_dynamic",
    OrdinarySql: "ordinary_sql",
    **dict.fromkeys(dbs.DATABASE_SCRIPT_STATEMENTS, "database_statement"),
}
# What an uncommittable transaction still lets run: it writes nothing.
_HARMLESS = (cp.Declare, cp.Assign, cp.Select, cp.Print, cp.SetOption, cp.Throw,
             cp.Raiserror, cp.Return)


class _Rollback(Exception):
    """Thrown into Database.transaction() to roll it back (ROLLBACK, a failed statement)."""


def run_script(database: BatchDatabase, statements: Sequence[cp.ScriptStatement]
               ) -> BatchResults:
    """Run parsed statements in order on ``database`` (see the module docstring)."""
    return _Run(database).run(statements)


def run_procedure(database: BatchDatabase, schema: str | None, name: str) -> int:
    """EXEC schema.name on ``database`` without arguments, as a batch of its own (what
    activation runs, C8); returns the procedure's RETURN code."""
    call = Execute(None, schema, name, (), "@@activation_return", _ACTIVATION_TOKEN)
    run = _Run(database, databases=database.script_databases())
    run.variables[variable_key("@@activation_return")] = (None, None)
    run.run([call])
    return run.variables[variable_key("@@activation_return")][1] or 0


def run_batches(database: BatchDatabase, batches: Sequence[cp.Batch],
                databases: dbs.ScriptDatabases | None = None) -> BatchResults:
    """Run the batches of a script in order, each on its own (see the module docstring):
    a batch of DDL only all or nothing (``database.run_statements``), any other as
    ``run_script`` runs it. ``databases``: the instance's, which USE switches among (the
    database in use goes on to the next batch)."""
    results = BatchResults()
    runs = sum(batch.count for batch in batches)
    ran = 0
    for batch in batches:
        for _ in range(batch.count):
            try:
                if any(cp.is_conversation_statement(s) for s in batch.statements):
                    run = _Run(database, databases=databases)
                    returned = run.run(batch.statements)
                    database = run.db
                    results.extend(returned)
                    results.messages.extend(returned.messages)
                else:
                    database.run_statements(batch.statements)
            except Exception as exc:
                if runs > 1:  # one batch: its error as it always was
                    if ran and exc.args and isinstance(exc.args[0], str):
                        exc.args = (f"{exc.args[0]}; the {ran} batch(es) before it (up to "
                                    "GO) ran", *exc.args[1:])
                    failed = getattr(exc, "results", BatchResults())
                    exc.results = BatchResults(  # type: ignore[attr-defined]
                        [*results, *failed],
                        [*results.messages, *getattr(failed, "messages", [])])
                raise
            ran += 1
    return results
