"""Activation procedures for the activation tests (named 'activation_handlers:...' with the
tests directory on sys.path, as pytest's rootdir-relative imports put it).

Each is called with the Database of its queue. What they saw goes to module-level lists
(the tests run them in this process) or, for the process test, to a file named by the
PYBROKER_TEST_RECORD environment variable.
"""

from __future__ import annotations

import os
import threading

import pybroker

QUEUE = "TargetQueue"
received: list[bytes] = []
calls: list[str] = []
lock = threading.Lock()
release = threading.Event()  # what the never-returning handler never sees set


def _drain(db: pybroker.Database, queue: str, handle) -> None:
    while True:
        with db.transaction():
            messages = db.receive(queue, max_messages=10, timeout=0.2)
            if not messages:
                return
            for message in messages:
                handle(db, message)


def record(db: pybroker.Database) -> None:
    """Receive until the queue is empty, keeping each body."""
    with lock:
        calls.append(db.name)

    def keep(db: pybroker.Database, message: pybroker.Message) -> None:
        if message.message_type_name == "DEFAULT":
            with lock:
                received.append(message.message_body)

    _drain(db, QUEUE, keep)


def reply(db: pybroker.Database) -> None:
    """Answer each message on its conversation with the body upper-cased, then end it."""
    def answer(db: pybroker.Database, message: pybroker.Message) -> None:
        if message.message_type_name == "DEFAULT":
            conversation = db.conversation(message.conversation_handle)
            conversation.send(message.message_body.upper())
            conversation.end()

    _drain(db, QUEUE, answer)


def explode(db: pybroker.Database) -> None:
    """Take a message and raise: the transaction rolls back, the message goes back."""
    with lock:
        calls.append("explode")
    with db.transaction():
        db.receive(QUEUE, timeout=0.2)
        raise ValueError("poison body")


def never_return(db: pybroker.Database) -> None:
    """Take one message, then hold the reader until ``release`` is set (for ever, unless
    a test sets it), outside any transaction."""
    with lock:
        calls.append("never")
    db.receive(QUEUE, timeout=0.2)
    release.wait()


def hold(db: pybroker.Database) -> None:
    """Hold the reader until ``release`` is set, receiving nothing: its queue stays behind,
    so its monitor adds a reader at every periodic check (a witness that checks ran)."""
    with lock:
        calls.append("hold")
    release.wait(30)


def slow(db: pybroker.Database) -> None:
    """Take one message per call, slowly, so that the queue stays behind."""
    with lock:
        calls.append("slow")
    while not release.is_set():
        with db.transaction():
            messages = db.receive(QUEUE, timeout=0.2)
        if not messages:
            return
        release.wait(0.05)


def to_file(db: pybroker.Database) -> None:
    """Receive from the queue PYBROKER_TEST_QUEUE names until it is empty and append each
    body to the file PYBROKER_TEST_RECORD names."""
    path = os.environ["PYBROKER_TEST_RECORD"]

    def keep(db: pybroker.Database, message: pybroker.Message) -> None:
        if message.message_type_name == "DEFAULT":
            with open(path, "ab") as out:
                out.write(message.message_body + b"\n")

    _drain(db, os.environ.get("PYBROKER_TEST_QUEUE", QUEUE), keep)


not_callable = 42


def wait_long(db: pybroker.Database) -> None:
    """Receive with a long WAITFOR, over and over: only closing the instance ends it."""
    with lock:
        calls.append("wait_long")
    while True:
        db.receive(QUEUE, timeout=60)


# side_by_side: each reader holds one message's group in its open transaction until the
# other reader holds one too (C7); the groups held at once, and any reader left alone
together = threading.Barrier(2, timeout=30)
held_together: list[str] = []
alone: list[str] = []


def side_by_side(db: pybroker.Database) -> None:
    """Receive one message in a transaction and, still holding it, wait for another reader
    to hold one of its own; commit both. A reader that waits in vain is noted in ``alone``
    and rolls back."""
    with lock:
        calls.append("side_by_side")
    while True:
        with db.transaction():
            messages = db.receive(QUEUE, max_messages=1, timeout=0.2)
            if not messages:
                return
            group = str(messages[0].conversation_group_id)
            try:
                together.wait()
            except threading.BrokenBarrierError:
                with lock:
                    alone.append(group)
                raise
            with lock:
                held_together.append(group)
