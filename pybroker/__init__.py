"""pybroker: SQL Server Service Broker's routing, rebuilt in Python with state in DuckDB.

    import pybroker
    with pybroker.connect("broker.duckdb") as inst:
        db = inst.create_database("AdventureWorks2008R2")
        decision = inst.route("InventoryService", origin="AdventureWorks2008R2")
"""

from pybroker.api.conversation import Conversation
from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.apps.diagnose.report import diagnose
from pybroker.apps.diagnose.trace import trace
from pybroker.core.conversation.model import Message
from pybroker.core.routing.decision import RouteDecision, TraceStep
from pybroker.core.routing.engine import OUTSIDE, ExplainStep
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    ContractViolationError,
    ConversationError,
    ConversationStateError,
    DeadlockVictimError,
    FrameError,
    InstanceClosedError,
    InUseError,
    InvalidArgumentError,
    LockTimeoutError,
    MasterOnlyError,
    MessageValidationError,
    NotFoundError,
    PipelineError,
    QueueDisabledError,
    RouteDefinitionError,
    ServerError,
    ServerGoneError,
    StorageError,
    TemplateError,
    TransactionError,
    TsqlSyntaxError,
    UnsupportedOptionError,
    UnsupportedStatementError,
    WireError,
    WriteConflictError,
)
from pybroker.kernel.broker_endpoint.runtime import BrokerEndpoint
from pybroker.kernel.catalog_objects import Contract, MessageType, Queue, Route, Service
from pybroker.server.connecting import connect
from pybroker.server.http import serve_metrics

__version__ = "0.1.0"

__all__ = [
    "OUTSIDE",
    "AlreadyExistsError",
    "BrokerEndpoint",
    "BrokerError",
    "Contract",
    "ContractViolationError",
    "Conversation",
    "ConversationError",
    "ConversationStateError",
    "Database",
    "DeadlockVictimError",
    "ExplainStep",
    "FrameError",
    "InUseError",
    "Instance",
    "InstanceClosedError",
    "InvalidArgumentError",
    "LockTimeoutError",
    "MasterOnlyError",
    "Message",
    "MessageType",
    "MessageValidationError",
    "NotFoundError",
    "PipelineError",
    "Queue",
    "QueueDisabledError",
    "Route",
    "RouteDecision",
    "RouteDefinitionError",
    "ServerError",
    "ServerGoneError",
    "Service",
    "StorageError",
    "TemplateError",
    "TraceStep",
    "TransactionError",
    "TsqlSyntaxError",
    "UnsupportedOptionError",
    "UnsupportedStatementError",
    "WireError",
    "WriteConflictError",
    "connect",
    "diagnose",
    "serve_metrics",
    "trace",
]
