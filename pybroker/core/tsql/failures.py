"""The message of a statement's error in a T-SQL batch: which statement failed (its verb as
T-SQL writes it, and its line and column) and what became of the batch
(pybroker.core.tsql.script prefixes every error it stops on with it)."""

from __future__ import annotations

import re
from typing import Any

from pybroker.core.tsql import conversation_parser as cp
from pybroker.core.tsql.ordinary_sql_statement import OrdinarySql

# The verb of each statement class whose name does not say it.
VERBS = {
    "Assign": "SET", "BeginDialog": "BEGIN DIALOG", "GetConversationGroup":
    "GET CONVERSATION GROUP", "EndConversation": "END CONVERSATION", "BeginTimer":
    "BEGIN CONVERSATION TIMER", "MoveConversation": "MOVE CONVERSATION", "SetOption": "SET",
    "ExecuteDynamic": "EXEC",
}  # fmt: skip


def failed_statement(statement: Any, message: str, ran: int, undone: bool) -> str:
    """The error's message, saying which statement failed and what became of the batch."""
    name = type(statement).__name__
    verb = VERBS.get(name) or " ".join(re.findall("[A-Z][a-z]*", name)).upper()
    if isinstance(statement, cp.Transaction):
        verb = statement.action
    elif isinstance(statement, OrdinarySql):
        verb = statement.kind
    elif isinstance(statement, cp.Receive) and statement.waits:
        verb = "WAITFOR (RECEIVE)"
    elif isinstance(statement, cp.GetConversationGroup) and statement.waits:
        verb = "WAITFOR (GET CONVERSATION GROUP)"
    token = getattr(statement, "token", None)
    head = f"{verb} at {token.where}" if token is not None else (
        f"statement {ran + 1} of the batch ({verb})")
    tail = "; the open transaction was rolled back" if undone else (
        f"; the {ran} statement(s) before it ran" if ran else "")
    return f"{head} failed: {message}{tail}"
