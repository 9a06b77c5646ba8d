"""Calling a stored procedure (EXEC): its stored definition parsed, and the arguments bound
to its parameters as SQL Server binds them; pybroker.core.tsql.script runs the body.

SQL Server's errors, with its numbers: a procedure that does not exist (2812), a parameter
without a default that was not passed (201), more arguments than parameters (8144), a name
that is no parameter (8145), OUTPUT for a parameter not declared OUTPUT (8162), a
parameter passed twice (8143), procedures nested more than 32 deep (217).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from pybroker.core.tsql.conversation_parser import parse_script
from pybroker.core.tsql.error_numbers import TsqlError
from pybroker.core.tsql.expressions import Variable, variable_key
from pybroker.core.tsql.lexer import tokenize
from pybroker.core.tsql.parser import Parser
from pybroker.core.tsql.procedure_parser import (
    CreateProcedure,
    Execute,
    Parameter,
    qualified_name,
)
from pybroker.core.tsql.values import Value

MAX_NESTING = 32  # SQL Server's @@NESTLEVEL limit


@lru_cache(maxsize=256)
def parsed(definition: str) -> CreateProcedure:
    """A procedure's stored definition, parsed (once per text: an activated procedure runs
    again and again)."""
    [statement] = parse_script(definition)
    assert isinstance(statement, CreateProcedure)  # only CREATE PROCEDURE text is stored
    return statement


def split_name(name: str) -> tuple[str | None, str | None, str]:
    """(database, schema, procedure) of a name as T-SQL writes it: proc, schema.proc or
    db.schema.proc, each part plain or [bracketed]."""
    p: Parser[object] = Parser(tokenize(name), {})
    parts = qualified_name(p, "a procedure name", 3)
    if p.token.kind != "end":
        raise p.expected("the end of the procedure name")
    database = parts[0] if len(parts) == 3 else None
    schema = parts[-2] if len(parts) >= 2 else None
    return database, schema, parts[-1]


def bind(parameters: Sequence[Parameter], call: Execute, value: Callable[[object], Value],
         name: str) -> tuple[dict[str, Value], list[tuple[str, str]]]:
    """The values (by variable key) of a procedure's (or sp_executesql's) parameters for
    ``call``, and the (parameter key, caller's variable) pairs that take OUTPUT values
    back."""
    by_key = {variable_key(p.name): p for p in parameters}
    given: dict[str, object] = {}
    outputs: list[tuple[str, str]] = []
    if len(call.arguments) > len(parameters):
        raise TsqlError(f"procedure or function {name} has too many arguments specified: "
                        f"it takes {len(parameters)}, not {len(call.arguments)}", 8144)
    for position, argument in enumerate(call.arguments):
        if argument.parameter is None:
            parameter = parameters[position]
        else:
            found = by_key.get(variable_key(argument.parameter))
            if found is None:
                raise TsqlError(f"{argument.parameter} is not a parameter for procedure "
                                f"{name}", 8145)
            parameter = found
        key = variable_key(parameter.name)
        if key in given:
            raise TsqlError(f"procedure or function {name} has the parameter "
                            f"{parameter.name} specified more than once", 8143)
        given[key] = argument
        if argument.output:
            if not parameter.output:
                raise TsqlError(
                    f"the formal parameter {parameter.name} of {name} was not declared as an "
                    "OUTPUT parameter, but the actual parameter passed in requested output",
                    8162)
            assert isinstance(argument.value, Variable)
            outputs.append((key, argument.value.name))
    values: dict[str, Value] = {}
    for parameter in parameters:
        key = variable_key(parameter.name)
        argument = given.get(key)
        expression = getattr(argument, "value", None)
        if expression is None:
            if not parameter.has_default:
                raise TsqlError(f"procedure or function {name} expects parameter "
                                f"{parameter.name}, which was not supplied", 201)
            expression = parameter.default
        values[key] = None if expression is None else value(expression)
    return values, outputs
