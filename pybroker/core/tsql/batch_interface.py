"""What the T-SQL interpreter (script.py) asks of the database it runs a batch on, and what
it gives back: the Protocols of a database, a conversation and ordinary SQL, through which
every verb goes (the public API satisfies them: api/database.py), and a batch's results."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.core.tsql import database_statements as dbs
from pybroker.core.tsql.ordinary_sql_statement import Rendered, SqlNames
from pybroker.core.tsql.values import Value

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.conversation.model import Message


class BatchConversation(Protocol):
    """The methods of a Conversation (pybroker.api.conversation) a batch calls."""

    handle: str

    @property
    def conversation_group_id(self) -> str: ...

    def send(self, body: bytes | str | None = b"", message_type: str = "DEFAULT") -> int: ...

    def end(self, error: int | None = None, description: str | None = None,
            cleanup: bool = False) -> None: ...

    def begin_timer(self, seconds: float) -> None: ...

    def move_to(self, group_id: str) -> None: ...


class MessageTypeRow(Protocol):
    """A message type as ``Database.message_types()`` lists it (pybroker.kernel.catalog_objects)."""

    @property
    def name(self) -> str: ...

    @property
    def validation(self) -> str: ...


class SqlDatabase(Protocol):
    """What a batch asks of a database for its ordinary SQL (pybroker.kernel.user_sql)."""

    def names(self) -> SqlNames: ...

    def run(self, rendered: Rendered, parameters: dict[str, Any]
            ) -> tuple[list[str], list[tuple[Any, ...]]]: ...

    def object_id(self, name: str, kind: str | None = None) -> int | None: ...


class BatchDatabase(Protocol):
    """The methods of a Database (pybroker.api.instance, which imports this module) a batch
    calls: its conversation verbs, its transaction, its message types and the runner of
    its DDL statements."""

    broker_instance: str

    def begin_dialog(self, from_service: str, to_service: str, *, contract: str = "DEFAULT",
                     broker_instance: str | None = None, lifetime: int | None = None,
                     related_conversation_group: str | None = None) -> BatchConversation: ...

    def conversation(self, handle: str) -> BatchConversation: ...

    def receive(self, queue: str, *, max_messages: int = 1, timeout: float = 0.0,
                conversation_handle: str | None = None,
                conversation_group_id: str | None = None) -> list[Message]: ...

    def get_conversation_group(self, queue: str, *, timeout: float = 0.0) -> str | None: ...

    def transaction(self) -> AbstractContextManager[Any]: ...

    def message_types(self) -> Sequence[MessageTypeRow]: ...

    def run_statements(self, statements: Iterable[object]) -> None: ...

    @property
    def name(self) -> str: ...

    def save_procedure(self, schema: str, name: str, definition: str, mode: str) -> None: ...

    def drop_procedure(self, schema: str, name: str, *, if_exists: bool = False) -> None: ...

    def procedure_definition(self, schema: str | None, name: str
                             ) -> tuple[str, str, str] | None: ...

    def ordinary_sql(self) -> SqlDatabase: ...
    def script_databases(self) -> dbs.ScriptDatabases: ...
    def clock(self) -> float:
        """The instance clock's time, epoch seconds (GETDATE() and the other date
        functions; a core reads no clock of its own)."""
        ...

    @property
    def session_id(self) -> int:
        """@@SPID: the number of the session running the batch."""
        ...


@dataclass(frozen=True, slots=True)
class ResultSet:
    """One result of a batch: what a RECEIVE or a SELECT returned, as SSMS shows a grid."""

    columns: tuple[str, ...]
    rows: list[tuple[Value, ...]] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[Value, ...]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def dicts(self) -> list[dict[str, Value]]:
        """The rows as {column: value} (a later column of the same name wins)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class BatchResults(list[ResultSet]):
    """What a script returned: its result sets, in order (the list itself), and the lines
    its PRINT statements wrote, in order (``messages``: what SSMS shows on its Messages
    tab; ``pybroker sql`` writes them to stderr)."""

    def __init__(self, results: Iterable[ResultSet] = (), messages: Iterable[str] = ()
                 ) -> None:
        super().__init__(results)
        self.messages: list[str] = list(messages)
