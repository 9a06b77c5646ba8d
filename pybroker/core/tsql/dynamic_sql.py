"""Dynamic SQL: EXEC[UTE] (text [+ text ...]) and EXEC sp_executesql @stmt [, @params [,
@p = value [OUTPUT], ...]], as SQL Server runs them: the text is a batch of its own, in a
scope of its own, parsed when the statement runs (pybroker.core.tsql.script runs it).

- The caller's variables are not visible in the text; sp_executesql's parameters are, and
  its OUTPUT parameters come back to the caller's variables.
- The static batch is refused whole before any of it runs when a statement is not
  understood; the text of dynamic SQL exists only when its EXEC runs, so a syntax error in
  it is an error of that EXEC (SQL Server's error 102, severity 15), with the line and
  column inside the text, which a TRY around the EXEC catches.
- A NULL or empty text runs nothing, as in SQL Server.
- USE inside the text switches the database for the rest of the text only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache

from pybroker.core.tsql import conversation_parser as cp
from pybroker.core.tsql.error_numbers import ErrorInfo, TsqlError
from pybroker.core.tsql.expressions import variable_key
from pybroker.core.tsql.lexer import tokenize
from pybroker.core.tsql.parser import Parser
from pybroker.core.tsql.procedure_parser import Execute, Parameter, read_parameters
from pybroker.core.tsql.values import Value, as_text
from pybroker.errors import TsqlSyntaxError

SYNTAX_ERROR = 102  # SQL Server's "incorrect syntax near ..."
SYNTAX_SEVERITY = 15
EXECUTESQL = "sp_executesql"
_FIXED = ("@stmt", "@params")  # sp_executesql's own parameters, in order
_PLACE = re.compile(r"line ([0-9]+), column ([0-9]+)")


def is_executesql(call: Execute) -> bool:
    return call.name.lower() == EXECUTESQL and call.database is None


def parse(text: Value, where: str, declared: Sequence[str], master: bool
          ) -> tuple[cp.ScriptStatement, ...]:
    """The statements of dynamic SQL (none for NULL or a text without a statement).
    Raises the parser's error, its message saying it is the text of the EXEC at ``where``
    and ``tsql_error`` holding error 102 at the line inside the text."""
    if text is None:
        return ()
    source = as_text(text, "the dynamic SQL", where)
    try:
        return _parsed(source, tuple(declared), master)
    except TsqlSyntaxError as exc:
        message = str(exc)
        found = _PLACE.search(message)
        line = int(found.group(1)) if found else 1
        exc.args = (f"Msg {SYNTAX_ERROR}, Level {SYNTAX_SEVERITY}, State 1, Line {line} of "
                    f"the dynamic SQL run by EXEC at {where} (its lines and columns count "
                    f"from the start of its text): {message}",)
        exc.tsql_error = ErrorInfo(  # type: ignore[attr-defined]
            SYNTAX_ERROR, message, SYNTAX_SEVERITY, 1, line, None)
        raise


@lru_cache(maxsize=256)
def _parsed(text: str, declared: tuple[str, ...], master: bool
            ) -> tuple[cp.ScriptStatement, ...]:
    """Parsed once per text (a loop that runs the same text parses it once)."""
    if len(tokenize(text)) == 1:  # nothing but blanks and comments
        return ()
    return tuple(cp.parse_script(text, master=master, declared=declared))


def executesql(call: Execute, value: Callable[[object], Value]
               ) -> tuple[Value, tuple[Parameter, ...], Execute]:
    """sp_executesql's text, the parameters its definition declares, and the call of them:
    ``call`` with its first two arguments (@stmt, @params) taken off."""
    where = call.token.where
    fixed: dict[str, Value] = {}
    rest = []
    for position, argument in enumerate(call.arguments):
        key = None if argument.parameter is None else argument.parameter.lower()
        if key is None and position < 2 and not rest:
            key = _FIXED[position]
        if key in _FIXED and not rest:
            if key in fixed:
                raise TsqlError(f"procedure or function {EXECUTESQL} has the parameter {key} "
                                "specified more than once", 8143)
            if argument.output or argument.value is None:
                raise TsqlError(f"{EXECUTESQL}'s {key} at {where} takes a text, not OUTPUT "
                                "or DEFAULT", 214)
            fixed[key] = value(argument.value)
        else:
            rest.append(argument)
    if "@stmt" not in fixed:
        raise TsqlError(f"procedure {EXECUTESQL} expects parameter @stmt, which was not "
                        "supplied", 201)
    definition = fixed.get("@params")
    parameters: tuple[Parameter, ...] = ()
    if definition is not None:
        parameters = parameter_list(as_text(definition, f"{EXECUTESQL}'s @params", where),
                                    where)
    if rest and not parameters:
        raise TsqlError(f"{EXECUTESQL} at {where} passes values but @params declares no "
                        "parameter: expected N'@name type, ...' as its second argument", 8178)
    return fixed["@stmt"], parameters, replace(call, arguments=tuple(rest))


def parameter_list(definition: str, where: str) -> tuple[Parameter, ...]:
    """sp_executesql's @params: @name type [= constant] [OUTPUT], ..."""
    try:
        p: Parser[object] = Parser(tokenize(definition), {})
        parameters = read_parameters(p) if definition.strip() else ()
        if p.token.kind != "end":
            raise p.expected("',' and the next parameter, or the end of @params")
    except TsqlSyntaxError as exc:
        raise TsqlError(f"the @params of {EXECUTESQL} at {where} is not understood (its "
                        f"lines and columns count from its start): {exc}", SYNTAX_ERROR,
                        SYNTAX_SEVERITY) from None
    return parameters


def declared_keys(parameters: Sequence[Parameter]) -> tuple[str, ...]:
    return tuple(variable_key(p.name) for p in parameters)

