"""T-SQL that ``Database.execute()`` runs: route DDL (SPEC R10) and MESSAGE TYPE, CONTRACT,
QUEUE and SERVICE DDL; on master also ENDPOINT and CERTIFICATE DDL (P2)."""

from pybroker.core.tsql.batch import Statement, parse_batch
from pybroker.core.tsql.endpoint_ddl import (
    AlterEndpoint,
    CreateCertificateFromFile,
    CreateCertificateWithSubject,
    CreateEndpoint,
    DropCertificate,
    DropEndpoint,
    EndpointStatement,
)
from pybroker.core.tsql.object_ddl import (
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
from pybroker.core.tsql.route_ddl import AlterRoute, CreateRoute, DropRoute, RouteStatement

__all__ = [
    "AlterEndpoint",
    "AlterMessageType",
    "AlterQueue",
    "AlterRoute",
    "AlterService",
    "CreateCertificateFromFile",
    "CreateCertificateWithSubject",
    "CreateContract",
    "CreateEndpoint",
    "CreateMessageType",
    "CreateQueue",
    "CreateRoute",
    "CreateService",
    "DropCertificate",
    "DropContract",
    "DropEndpoint",
    "DropMessageType",
    "DropQueue",
    "DropRoute",
    "DropService",
    "EndpointStatement",
    "ObjectStatement",
    "RouteStatement",
    "Statement",
    "parse_batch",
]
