"""pybroker: SQL Server Service Broker's routing, rebuilt in Python with state in DuckDB.

    import pybroker
    with pybroker.connect("broker.duckdb") as inst:
        db = inst.create_database("AdventureWorks2008R2")
        decision = inst.route("InventoryService", origin="AdventureWorks2008R2")
"""

from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InvalidArgumentError,
    NotFoundError,
    PipelineError,
    RouteDefinitionError,
    StorageError,
    TemplateError,
    TsqlSyntaxError,
    UnsupportedStatementError,
)
from pybroker.instance import Database, Instance, Queue, Route, Service, connect
from pybroker.routing.decision import RouteDecision, TraceStep
from pybroker.routing.engine import OUTSIDE, ExplainStep

__version__ = "0.1.0"

__all__ = [
    "OUTSIDE",
    "AlreadyExistsError",
    "BrokerError",
    "Database",
    "ExplainStep",
    "Instance",
    "InvalidArgumentError",
    "NotFoundError",
    "PipelineError",
    "Queue",
    "Route",
    "RouteDecision",
    "RouteDefinitionError",
    "Service",
    "StorageError",
    "TemplateError",
    "TraceStep",
    "TsqlSyntaxError",
    "UnsupportedStatementError",
    "connect",
]
