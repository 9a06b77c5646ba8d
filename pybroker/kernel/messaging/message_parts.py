"""P4.4: a message that crossed the wire in fragments, in its queue as its fragments.

When the last fragment of a message arrives in sequence for a queue that is ON, the queue
row is written with no body and ``body_fragments`` (migrations/010); the fragments stay in
message_fragments. RECEIVE reads the body back here, a run of pieces per statement into
one buffer of the message's size, so neither DuckDB nor Python ever holds the body as one
value besides that buffer (inserting a 100 MB body as one BLOB and reading it back costs
three to four times its size; this, about twice). The fragments leave with the message:
when RECEIVE takes it (the transaction's commit makes that final), when its conversation
ends, when its queue is dropped.

A message held out of order, one for a queue that is OFF (P8) and an error message are
still made whole on arrival (``reassemble``): they wait elsewhere first.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pybroker.errors import StorageError, WireError

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.core.wire.frames import MessageFragment
    from pybroker.kernel.messaging.unit_of_work import UnitOfWork

# DuckDB's memory while RECEIVE reads a body of STREAM_FROM bytes or more back
# (Store.streaming): the pieces read give way to the next, so the body is not held twice,
# in DuckDB's buffers and in the copy RECEIVE hands out (100 MB body: the receiver's peak
# growth went from 3.2-3.4x to 2.5-2.7x of it)
STREAM_FROM = 32 * 2**20
STREAM_LIMIT = 64 * 2**20
READ_BYTES = 8 * 2**20  # of pieces read back per statement (transmission_pieces.py), about
# A large body is kept as pieces of this many bytes, the fragments of a message at the
# receiver (message_fragments) and a body SEND stores (transmission_queue_pieces, written
# PIECES_PER_STATEMENT to a statement). DuckDB 1.5 cannot evict a value of its 256 KiB
# block or more, so fragments of 1 MiB beyond the memory limit failed a commit. And DuckDB
# 1.5.6 handles a BLOB column a vector of 2,048 rows at a time: a COMMIT writes its new rows
# to the log by scanning from the start of the vector they join, so once a checkpoint has
# written the rows before them, each commit reads those back (DataTable::WriteToLog ->
# ScanTableSegment), deleted ones too until a checkpoint drops their row group; and a scan
# of a range of rows reads every value of the vectors it passes. At 127 KiB a whole 100 MB
# body fits in one vector, and every commit of its last fragments read back most of it:
# the fresh receiver grew 2.4-2.7x the body. A vector of 8 KiB pieces is 16 MiB, which
# bounds both (`pybroker bench wire --body-mb 100`, with the checkpoint once such a message
# is complete, Store.checkpoint_after_commit: 1.62-1.89x; 16 KiB pieces, 1.9-2.4x). Pieces
# stored at another size (127 KiB, 128 KiB by earlier versions) are read back in order as
# they are (arrivals.py _reassemble too).
PIECE_SIZE = 8 * 2**10
PIECES_PER_STATEMENT = 2**20 // PIECE_SIZE  # of a fragment or a staged body, 1 MiB
# RECEIVE reads a run of a fragment's pieces (their piece_ids follow one another) about this
# many bytes per statement (select_message_pieces.sql); one per statement, through the
# index, if they are larger than PIECE_SIZE (kept by an earlier version): a range is a scan,
# which would read all of their vector
READ_RUN_BYTES = 2**20
# Columns of the rows RECEIVE's statements return (receive_messages.sql and the others)
HANDLE, SEQUENCE, BODY, BODY_FRAGMENTS = 1, 3, 5, 8


def body_buffer(size: int) -> io.BytesIO:
    """A buffer for a body of ``size`` bytes written in place, sized once, at position 0:
    its getvalue() then hands the bytes over without a copy."""
    out = io.BytesIO()
    if size:
        out.seek(size - 1)
        out.write(b"\0")
        out.seek(0)
    return out


def piece_count(body: bytes | memoryview) -> int:
    """How many pieces a body of this size is kept as (one, empty, for an empty body)."""
    return max(1, -(-len(body) // PIECE_SIZE))


def piece_runs(body: bytes | memoryview) -> Iterator[dict[str, list[Any]]]:
    """``body`` cut into its piece_count() pieces of PIECE_SIZE, as the ``piece_numbers``
    and ``message_bodies`` of one INSERT of PIECES_PER_STATEMENT of them at a time
    (wire/insert_message_fragment_pieces.sql, transmission/insert_pieces.sql)."""
    view, piece = memoryview(body), PIECE_SIZE
    count = piece_count(view)
    for first in range(0, count, PIECES_PER_STATEMENT):
        numbers = range(first, min(first + PIECES_PER_STATEMENT, count))
        yield {"piece_numbers": list(numbers),
               "message_bodies": [bytes(view[n * piece:(n + 1) * piece]) for n in numbers]}


def not_whole(f: MessageFragment) -> WireError:
    """Why the fragments held and ``f`` are refused (the batch is then retried one by one,
    and this arrival is refused)."""
    return WireError(
        f"the fragments of message {f.sequence} do not make a whole message of "
        f"{f.message_size} bytes in {f.fragment_count} fragments")


def fragment_step(f: MessageFragment, held: Iterable[int]) -> int:
    """The size of every fragment but the last of the message whose last missing fragment
    is ``f`` (``held``: the numbers of the others). Every fragment but the last has the
    sender's fragment size (P4.1), so fragment n starts at n times the step, whatever
    order they came in. A WireError if the numbers are not those of a whole message."""
    count, size = f.fragment_count, f.message_size
    numbers = [*held, f.fragment_number]
    if len(numbers) != count or set(numbers) != set(range(count)):
        raise not_whole(f)
    if f.fragment_number == count - 1:
        step, rest = divmod(size - len(f.body), count - 1)
        if rest:
            raise not_whole(f)
        return step
    return len(f.body)


def check_whole(f: MessageFragment, step: int, sizes: Mapping[int, int]) -> None:
    """A WireError unless ``sizes`` (fragment number -> its bytes, ``f`` among them) are
    those of the fragments of ``f``'s message, every one but the last ``step`` bytes."""
    count = f.fragment_count
    last = f.message_size - step * (count - 1)
    if len(sizes) != count:
        raise not_whole(f)
    for number, length in sizes.items():
        if length != (last if number == count - 1 else step):
            raise not_whole(f)


def read_body(uow: UnitOfWork, handle: str, sequence: int, count: int) -> bytes:
    """The body of message ``sequence`` of endpoint ``handle``, kept as ``count``
    fragments: the piece_ids of its pieces in order (one statement, no body read), then
    their bodies, a run of piece_ids at a time (_runs), into one buffer of the message's
    size; a body of STREAM_FROM bytes or more with DuckDB's memory held to STREAM_LIMIT
    meanwhile (Store.streaming). A StorageError if a fragment or a piece of one is
    missing."""
    rows = uow.sql("wire/select_message_parts.sql", {
        "conversation_handle": handle, "message_sequence_number": sequence})
    number, piece = 0, 0  # the fragment, and its piece, expected next
    for _piece_id, got, at, _size in rows:
        if (got, at) == (number + 1, 0) and piece:
            number, piece = number + 1, 0  # the next fragment begins
        if (got, at) != (number, piece):
            raise _missing(handle, sequence, count, number)
        piece += 1
    if number != count - 1 or not piece:
        raise _missing(handle, sequence, count, number if piece else count - 1)
    size = rows[0][3]
    with contextlib.ExitStack() as stack:
        if size >= STREAM_FROM:
            stack.enter_context(uow.m.store.streaming(STREAM_LIMIT))
        out, written = body_buffer(size), 0
        for run in _runs([r[0] for r in rows], size):
            if len(run) == 1:
                found = [(run[0], part) for (part,) in uow.sql(
                    "wire/select_message_piece.sql", {"piece_id": run[0]})]
            else:
                found = uow.sql("wire/select_message_pieces.sql", {
                    "first_piece_id": run[0], "last_piece_id": run[-1]})
            if [piece_id for piece_id, _part in found] != run:
                raise _missing(handle, sequence, count, count - 1)
            for _piece_id, part in found:
                if part:
                    out.write(part)
                    written += len(part)
            del found
    if written != size:
        raise _missing(handle, sequence, count, count - 1)
    return out.getvalue()


def _runs(piece_ids: list[int], size: int) -> Iterator[list[int]]:
    """``piece_ids`` (a body of ``size`` bytes, in order) cut into the runs RECEIVE reads
    one statement each: ids that follow one another, READ_RUN_BYTES of pieces at most; one
    each if the pieces are larger than PIECE_SIZE."""
    piece = size // len(piece_ids) if piece_ids else 0
    most = 1 if piece > PIECE_SIZE else max(1, READ_RUN_BYTES // max(1, piece))
    run: list[int] = []
    for piece_id in piece_ids:
        if run and (piece_id != run[-1] + 1 or len(run) == most):
            yield run
            run = []
        run.append(piece_id)
    if run:
        yield run


def _missing(handle: str, sequence: int, count: int, number: int) -> StorageError:
    return StorageError(
        f"fragment {number} of the {count} of message {sequence} of conversation endpoint "
        f"{handle} is missing from message_fragments, or a piece of it: the message cannot "
        "be received")


def with_bodies(uow: UnitOfWork, rows: list[tuple[Any, ...]], taken: bool
                ) -> list[tuple[Any, ...]]:
    """Rows RECEIVE returned (receive_messages.sql and its kin) with the body of each one
    kept as its fragments read back into its place; ``taken``: the messages left the
    queue (not retained), so their fragments leave in the same transaction."""
    if not any(r[BODY_FRAGMENTS] for r in rows):
        return rows
    out = []
    for r in rows:
        if r[BODY_FRAGMENTS]:
            body = read_body(uow, r[HANDLE], r[SEQUENCE], r[BODY_FRAGMENTS])
            if taken:
                delete(uow, r[HANDLE], r[SEQUENCE])
            r = (*r[:BODY], body, *r[BODY + 1:])
        out.append(r)
    return out


def delete(uow: UnitOfWork, handle: str, sequence: int) -> None:
    """The fragments of a message taken out of its queue leave with it."""
    uow.delete_pieces("wire/delete_message_fragments.sql", {
        "conversation_handle": handle, "message_sequence_number": sequence})


def reassemble(uow: UnitOfWork, handle: str, f: MessageFragment,
                held: Iterable[int]) -> bytes:
    """P4.4: the message whose last missing fragment is ``f``, its other fragments read from
    message_fragments in one scan, row by row, each written at its place in one buffer of
    the message's size; then they are deleted. A large message costs one body's worth of
    memory in Python, not the three of taking every fragment out as a list and joining it.
    (A message that goes straight into its queue is not made whole: py.)"""
    step = fragment_step(f, held)
    out = body_buffer(f.message_size)
    key = {"conversation_handle": handle, "message_sequence_number": f.sequence}
    uow.flush()
    uow.ensure_tx()
    # where each piece goes: after the pieces before it in its fragment (cut to the
    # PIECE_SIZE of the version that stored them)
    lengths: dict[int, dict[int, int]] = {}
    for number, at, length in uow.sql("wire/select_fragment_pieces.sql", key):
        lengths.setdefault(number, {})[at] = length or 0
    offsets: dict[tuple[int, int], int] = {}
    sizes: dict[int, int] = {}
    for number, pieces in lengths.items():
        if not 0 <= number < f.fragment_count or sorted(pieces) != list(range(len(pieces))):
            raise not_whole(f)
        start = number * step
        for at in range(len(pieces)):
            offsets[number, at] = start
            start += pieces[at]
        sizes[number] = start - number * step
        if sizes[number] > step and number != f.fragment_count - 1:
            raise not_whole(f)

    def place(number: int, at: int, body: bytes | memoryview | None) -> None:
        body = body or b""
        if offsets.get((number, at)) is None:
            raise not_whole(f)
        out.seek(offsets.pop((number, at)))
        out.write(body)

    uow.m.store.each_row("wire/select_message_fragments.sql", key,
                          lambda row: place(row[0], row[1], row[2]))
    if f.fragment_number in sizes:
        raise not_whole(f)
    sizes[f.fragment_number] = len(f.body)
    out.seek(f.fragment_number * step)
    out.write(f.body)
    if out.seek(0, io.SEEK_END) != f.message_size:
        raise not_whole(f)
    check_whole(f, step, sizes)
    delete(uow, handle, f.sequence)
    return out.getvalue()
