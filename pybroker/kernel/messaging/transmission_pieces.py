"""P5.2, P4.4: a large body SEND puts in the transmission queue, kept as pieces.

A body of unit_of_work.STAGE_BYTES or more is not bound as one value of its
transmission_queue row: its pieces (message_parts.PIECE_SIZE, 1 MiB of them per
statement) go into transmission_queue_pieces first, on the store's second connection,
committed about COMMIT_BYTES at a time (Store.commit_apart); then the row, with no body and
``body_pieces``, is written in the SEND's own transaction (migrations/011). Bound whole in
one transaction, a 100 MB body cost DuckDB three times its size in memory, and a 1 GB one
a memory limit of three times that; committed a few MiB at a time, about its size, and
DuckDB may write pieces out to the file beyond its memory limit.

What makes it safe: the pieces are written at the unit of work's flush, under the store's
lock, so nothing else runs on the file meanwhile; the row that names them commits with
the SEND. If the SEND rolls back, its pieces are deleted before the lock is let go
(UnitOfWork.rollback); if the process stops first, the instance deletes pieces no row
names when it opens (delete_orphan_pieces.sql). Pieces leave with their row: when the
far side acknowledges the message, and when the conversation's transmissions are dropped.
The wire never reads them: it sends the body SEND was given, held in memory until
acknowledged; they are read back only when the message goes again after a restart or a
delay, and by sys.transmission_queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pybroker.errors import StorageError
from pybroker.kernel.messaging import message_parts

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork

COMMIT_BYTES = 8 * 2**20  # of pieces committed at once, about
COUNT_PIECES = "transmission/count_pieces.sql"  # UnitOfWork.delete_pieces
# Columns of select_transmission_queue_of.sql's rows
BODY, BODY_PIECES, MESSAGE_SIZE = 4, 7, 8


def stage(uow: UnitOfWork, handle: str, sequence: int, body: bytes | memoryview) -> int:
    """Write ``body`` as the pieces of message ``sequence`` of endpoint ``handle``,
    committed apart from the unit of work's transaction; the number of pieces. The
    unit of work notes them, so that a rollback deletes them."""
    key = {"conversation_handle": handle, "message_sequence_number": sequence}
    store = uow.m.store
    store.room_apart(len(body))
    uow.staged_pieces.append((handle, sequence))
    store.commit_apart("transmission/delete_pieces_of_message.sql", [key], 1)
    runs_per_commit = max(1, COMMIT_BYTES // (
        message_parts.PIECE_SIZE * message_parts.PIECES_PER_STATEMENT))
    store.commit_apart("transmission/insert_pieces.sql",
                       ({**key, **run} for run in message_parts.piece_runs(body)),
                       runs_per_commit)
    store.checkpoint_after_commit()  # DuckDB cannot while the SEND's transaction is open
    return message_parts.piece_count(body)


def unstage(uow: UnitOfWork) -> None:
    """A rollback: the pieces this unit of work wrote go (before the store's lock is let
    go, so no SEND can have taken the same sequence number since)."""
    if uow.staged_pieces:
        uow.m.store.commit_apart("transmission/delete_pieces_of_message.sql", [
            {"conversation_handle": h, "message_sequence_number": s}
            for h, s in uow.staged_pieces], 1_000)
        uow.staged_pieces.clear()


def read_body(uow: UnitOfWork, handle: str, sequence: int, pieces: int, size: int) -> bytes:
    """The body of a message of the transmission queue kept as ``pieces`` pieces
    (``size`` bytes), read back about message_parts.READ_BYTES per statement into one
    buffer of its size."""
    out = message_parts.body_buffer(size)
    step = max(1, message_parts.READ_BYTES // message_parts.PIECE_SIZE)
    number = 0
    while number < pieces:
        end = min(number + step, pieces)
        for got, part in uow.sql("transmission/select_pieces.sql", {
                "conversation_handle": handle, "message_sequence_number": sequence,
                "first_piece": number, "end_piece": end}):
            if got != number:
                break
            out.write(part or b"")
            number += 1
        if number != end:
            break
    if number != pieces or out.tell() != size:
        raise StorageError(
            f"piece {number} of the {pieces} of message {sequence} of conversation endpoint "
            f"{handle} is missing from transmission_queue_pieces, or the pieces do not make "
            f"its {size} bytes: the message cannot be sent again")
    return out.getvalue()


def with_bodies(uow: UnitOfWork, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows of select_transmission_queue_of.sql, each with its body in its place (read
    back when kept as pieces), without the columns that say how it is kept."""
    out = []
    for r in rows:
        body = r[BODY]
        if r[BODY_PIECES] is not None:
            body = read_body(uow, r[0], r[1], r[BODY_PIECES], r[MESSAGE_SIZE])
        out.append((*r[:BODY], body, *r[BODY + 1:BODY_PIECES]))
    return out


def delete_acknowledged(uow: UnitOfWork, params: dict[str, str]) -> None:
    """The pieces of acknowledged messages (the runs of wire/delete_acknowledged.sql)."""
    if uow.m.transmission_pieces:
        uow.delete_pieces("transmission/delete_acknowledged_pieces.sql", params, COUNT_PIECES)


def delete_transmissions_of(uow: UnitOfWork, handles: str) -> None:
    """Every message of these endpoints (``handles``: one handle, or columns.guids of
    several) leaves the transmission queue, with its pieces."""
    params = {"conversation_handle": handles}
    uow.sql("conversation/delete_transmission_queue_of.sql", params)
    if uow.m.transmission_pieces:
        uow.delete_pieces("transmission/delete_pieces_of.sql", params, COUNT_PIECES)
