"""The XML methods a Service Broker script calls on a message body: ``x.value('path',
'type')``, ``x.exist('path')`` and ``x.query('path')`` on an XML value (a variable, or
``CAST(message_body AS XML)``), for the XPath subset scripts use.

The paths are evaluated by the standard library's xml.etree.ElementTree, whose ElementPath
covers what Service Broker scripts write: steps of names and ``*``, ``//``, ``.``, ``..``,
the predicates ``[n]``, ``[last()]``, ``[@a]``, ``[@a='v']``, ``[name]`` and
``[name='v']``; to that this module adds what SQL Server's XQuery spells its own way: an
absolute path (``/a/b``), ``(path)[n]``, a last step ``text()`` or ``@attribute``,
``*:name`` (any namespace) and the prologs ``declare default element namespace "uri";``
and ``declare namespace p = "uri";``. No new dependency: lxml would add XPath 1.0's
functions, which scripts of this kind do not call, at the price of a compiled dependency;
anything beyond the subset (functions, ``sql:variable()``, axes, FLWOR) is refused when the
batch is parsed, with its line and column.

**Chosen where SQL Server differs**: ``value()`` takes the first item its path selects;
SQL Server refuses a path that is not a singleton (``(path)[1]``) when it compiles the
batch. Every script written for SQL Server has the ``[1]``, so it runs the same here.
"""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybroker.core.tsql.lexer import Token, tokenize
from pybroker.core.tsql.parser import Parser
from pybroker.errors import InvalidArgumentError, TsqlSyntaxError

METHODS = ("VALUE", "EXIST", "QUERY")
_PROLOG = re.compile(
    r"\s*declare\s+(?:default\s+element\s+namespace\s+|namespace\s+([A-Za-z_][\w.-]*)\s*=\s*)"
    r"(?:\"([^\"]*)\"|'([^']*)')\s*;", re.IGNORECASE)
_SINGLETON = re.compile(r"\s*\((.*)\)\s*\[\s*([0-9]+)\s*\]\s*", re.DOTALL)
_STEP_NAME = re.compile(r"(?<![\w.@{}:-])(\*|[A-Za-z_][\w.-]*):([A-Za-z_][\w.-]*|\*)")
_PLAIN_NAME = re.compile(r"(?<![\w.@{}:'\"-])([A-Za-z_][\w.-]*)(?![\w.(:'\"-])")
_FUNCTION = re.compile(r"([A-Za-z_][\w.:-]*)\s*\(")
_ALLOWED_FUNCTIONS = ("text", "last")


@dataclass(frozen=True, slots=True)
class Path:
    """A path as ElementTree runs it: ``steps`` relative to a node above the root, the
    item of the result (``index``, from 1; None for all), and what the last step takes
    (``text()``, an ``@attribute``, or the elements themselves: None)."""

    steps: str
    index: int | None
    text: bool
    attribute: str | None
    namespaces: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class XmlMethod:
    """``operand.method('path'[, 'type'])``; ``type`` is value()'s, as the caller read it."""

    operand: Any
    method: str
    path: Path
    type: Any
    token: Token


def starts_method(p: Parser[Any]) -> bool:
    """Whether ``.value(``, ``.exist(`` or ``.query(`` follows the operand just read."""
    ahead = p.tokens[p.pos : p.pos + 3]
    return (len(ahead) == 3 and ahead[0].is_symbol(".") and ahead[1].is_word(*METHODS)
            and ahead[2].is_symbol("("))


def read_method(p: Parser[Any], operand: Any, parse_type: Callable[..., Any]) -> XmlMethod:
    """The method call after ``operand``; ``parse_type`` reads value()'s type from its text
    (pybroker.core.tsql.expressions.parse_type)."""
    p.advance()
    t = p.advance()
    method = t.text.upper()
    p.advance()  # (
    path_token = p.token
    if path_token.kind != "string":
        raise p.expected(f"the XQuery path of {t.text}() as a string literal")
    p.advance()
    path = compile_path(path_token.text, path_token)
    sql_type = None
    if method == "VALUE":
        p.require(",", "',' and the SQL type after value()'s path")
        type_token = p.token
        if type_token.kind != "string":
            raise p.expected("value()'s SQL type as a string literal, e.g. 'INT'")
        p.advance()
        # the type's own tokens, each placed at the string (where an error points)
        tokens = [Token(k.kind, k.text, type_token.line, type_token.column)
                  for k in tokenize(type_token.text)]
        reader = Parser(tokens, {})
        sql_type = parse_type(reader, cast=True)
        if reader.token.kind != "end":
            raise reader.expected(f"only a SQL type in value()'s type {type_token.text!r}")
    p.require(")", f"')' to close {t.text}(")
    return XmlMethod(operand, method, path, sql_type, t)


def compile_path(text: str, token: Token) -> Path:
    """SQL Server's XQuery path as ElementTree's; refused at ``token`` beyond the subset."""
    namespaces: dict[str, str] = {}
    default = None
    rest = text
    while (prolog := _PROLOG.match(rest)) is not None:
        uri = prolog.group(2) if prolog.group(2) is not None else prolog.group(3)
        if prolog.group(1) is None:
            default = uri
        else:
            namespaces[prolog.group(1)] = uri
        rest = rest[prolog.end():]
    index = None
    whole = _SINGLETON.fullmatch(rest)
    if whole is not None:
        rest, index = whole.group(1), int(whole.group(2))
        if index < 1:
            raise _refused(text, token, "an item number counts from 1")
    rest = rest.strip()
    if "::" in rest:
        raise _refused(text, token, "axes (name::) are not in the subset")
    for name in _FUNCTION.findall(rest):
        if name not in _ALLOWED_FUNCTIONS:
            raise _refused(text, token, f"the function {name}() is not in the subset")
    takes_text = attribute = None
    if rest.endswith("/text()"):
        rest, takes_text = rest[: -len("/text()")], True
    elif (found := re.search(r"/@([A-Za-z_][\w.-]*)$", rest)) is not None:
        rest, attribute = rest[: found.start()], found.group(1)
    if not rest.startswith("/"):
        raise _refused(text, token, "expected an absolute path (/root/...)")

    def qualified(match: re.Match[str]) -> str:
        prefix, local = match.group(1), match.group(2)
        if prefix == "*":
            return "{*}" + local
        if prefix not in namespaces:
            raise _refused(text, token, f"the prefix {prefix} is not declared")
        return "{" + namespaces[prefix] + "}" + local

    steps = _STEP_NAME.sub(qualified, rest)
    if default is not None:
        steps = _PLAIN_NAME.sub(lambda m: m.group(1) if m.group(1) in _ALLOWED_FUNCTIONS
                                else "{" + default + "}" + m.group(1), steps)
    steps = "." + steps
    try:
        ET.Element("x").findall(steps)
    except (SyntaxError, KeyError, TypeError) as exc:
        raise _refused(text, token, str(exc) or "ElementTree cannot read it") from None
    return Path(steps, index, bool(takes_text), attribute, tuple(namespaces.items()))


def _refused(text: str, token: Token, why: str) -> TsqlSyntaxError:
    return TsqlSyntaxError(
        f"the XQuery path {text!r} at {token.where} is not supported: {why} (pybroker reads "
        "paths of names, *, //, [n], [@a='v'], text() and @attribute)")


def call(method: XmlMethod, document: Any) -> Any:
    """The method's result on ``document`` (XML text; a body's bytes are UTF-8): NULL on
    NULL; exist() 1 or 0; query() the selected XML; value() the text of the first item
    (the caller converts it to the method's type)."""
    if document is None:
        return None
    if isinstance(document, bytes):
        document = document.decode("utf-8", errors="strict")
    where = method.token.where
    try:
        root = ET.fromstring(str(document))
    except ET.ParseError as exc:
        raise InvalidArgumentError(f"{method.method.lower()}() at {where}: the value is not "
                                   f"well-formed XML ({exc})") from None
    top = ET.Element("document")  # so that an absolute path's first step is the root
    top.append(root)
    path = method.path
    items: list[Any] = top.findall(path.steps)
    if path.attribute is not None:
        items = [e.get(path.attribute) for e in items if path.attribute in e.attrib]
    elif path.text:
        items = [e.text for e in items if e.text is not None]
    if path.index is not None:
        items = items[path.index - 1 : path.index]
    if method.method == "EXIST":
        return 1 if items else 0
    if method.method == "QUERY":
        return "".join(i if isinstance(i, str) else _serialized(i) for i in items)
    if not items:
        return None
    first = items[0]
    return first if isinstance(first, str) else "".join(first.itertext())


def _serialized(element: ET.Element) -> str:
    """The element as XML, without the text that follows it in its parent."""
    alone = copy.copy(element)
    alone.tail = None
    return ET.tostring(alone, encoding="unicode")
