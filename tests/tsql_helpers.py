"""What the tests of T-SQL programs share: a database with a queue and two services to run
batches in, and the PRINT lines a batch returns."""

from __future__ import annotations

from collections.abc import Iterator

import pybroker


def program_database(name: str) -> Iterator[pybroker.Database]:
    """An in-memory instance's database ``name`` with queue Q, service S (initiating only)
    and service T on it (the DEFAULT contract), closed when the caller's fixture ends."""
    inst = pybroker.connect(None, worker=False)
    database = inst.create_database(name)
    database.execute("CREATE QUEUE Q; CREATE SERVICE S ON QUEUE Q; "
                     "CREATE SERVICE T ON QUEUE Q ([DEFAULT])")
    yield database
    inst.close()


def printed(db: pybroker.Database, text: str) -> list[str]:
    """The PRINT lines (and low-severity RAISERROR messages) of running ``text``."""
    return db.execute(text).messages
