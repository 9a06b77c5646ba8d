"""T-SQL that ``Database.execute()`` runs: route DDL (SPEC R10) and MESSAGE TYPE, CONTRACT,
QUEUE and SERVICE DDL (issue 3)."""

from pybroker.tsql.batch import Statement, parse_batch
from pybroker.tsql.object_ddl import (
    AlterMessageType,
    AlterQueue,
    AlterService,
    CreateContract,
    CreateMessageType,
    CreateQueue,
    CreateService,
    DropContract,
    DropMessageType,
    DropQueue,
    DropService,
    ObjectStatement,
)
from pybroker.tsql.route_ddl import AlterRoute, CreateRoute, DropRoute, RouteStatement

__all__ = [
    "AlterMessageType",
    "AlterQueue",
    "AlterRoute",
    "AlterService",
    "CreateContract",
    "CreateMessageType",
    "CreateQueue",
    "CreateRoute",
    "CreateService",
    "DropContract",
    "DropMessageType",
    "DropQueue",
    "DropRoute",
    "DropService",
    "ObjectStatement",
    "RouteStatement",
    "Statement",
    "parse_batch",
]
