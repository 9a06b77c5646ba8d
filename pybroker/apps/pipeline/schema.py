"""The exported tables of an instance and the pipeline's input tables, defined once.

``pybroker export FILE DIR`` writes each table of :data:`EXPORTED_TABLES` that the instance
file holds as ``DIR/<name>.parquet`` with exactly these columns and types; every pipeline
job reads Parquet through the same definitions (and rejects a file whose columns are
missing or of the wrong type).

Types are chosen to survive DuckDB -> Parquet -> Spark unchanged: times are naive UTC
``TIMESTAMP`` (Spark reads them as TIMESTAMP_NTZ), GUIDs are lowercase ``VARCHAR`` (DuckDB's
UUID and INTERVAL types do not survive the trip).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # DuckDB type name: VARCHAR, INTEGER, BIGINT, BOOLEAN, TIMESTAMP, BLOB, DOUBLE
    guid: bool = False  # a GUID: exported as lowercase text


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    required: bool = True  # False: exported when the instance file has it (see note)
    note: str = ""

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _c(name: str, type_: str, guid: bool = False) -> Column:
    return Column(name, type_, guid)


# The routing state (migrations/001_catalog.sql): what resolve and impact read.
ROUTING_TABLES: tuple[Table, ...] = (
    Table("instance_settings", (
        _c("is_forwarding_enabled", "BOOLEAN"),
        _c("forwarding_size_mb", "INTEGER"),
    )),
    Table("databases", (
        _c("database_id", "INTEGER"),
        _c("name", "VARCHAR"),
        _c("service_broker_guid", "VARCHAR", guid=True),
        _c("is_broker_enabled", "BOOLEAN"),
        _c("create_date", "TIMESTAMP"),
    )),
    Table("service_queues", (
        _c("database_id", "INTEGER"),
        _c("name", "VARCHAR"),
        _c("is_receive_enabled", "BOOLEAN"),
        _c("is_enqueue_enabled", "BOOLEAN"),
        _c("create_date", "TIMESTAMP"),
    )),
    Table("services", (
        _c("database_id", "INTEGER"),
        _c("name", "VARCHAR"),
        _c("queue_name", "VARCHAR"),
        _c("create_date", "TIMESTAMP"),
    )),
    Table("routes", (
        _c("database_id", "INTEGER"),
        _c("route_id", "INTEGER"),
        _c("name", "VARCHAR"),
        _c("remote_service_name", "VARCHAR"),
        _c("broker_instance", "VARCHAR", guid=True),
        _c("lifetime", "TIMESTAMP"),
        _c("address", "VARCHAR"),
        _c("mirror_address", "VARCHAR"),
        _c("create_date", "TIMESTAMP"),
    )),
    Table("route_requests", (
        _c("database_id", "INTEGER"),
        _c("service_name", "VARCHAR"),
        _c("requested_at", "TIMESTAMP"),
    )),
)

_CONVERSATION_NOTE = (
    "conversation tables come with migration 002 (conversations); an instance file written "
    "before it exports the routing tables only"
)

# What an instance records about conversations (SPEC C1, C4, P9; migrations/002): what
# traffic reads. state is the two-letter code of C1 (SO SI CO DI DO ER CD).
CONVERSATION_TABLES: tuple[Table, ...] = (
    Table("conversation_endpoints", (
        _c("database_id", "INTEGER"),
        _c("conversation_handle", "VARCHAR", guid=True),
        _c("conversation_id", "VARCHAR", guid=True),
        _c("conversation_group_id", "VARCHAR", guid=True),
        _c("is_initiator", "BOOLEAN"),
        _c("service_name", "VARCHAR"),
        _c("service_contract_name", "VARCHAR"),
        _c("far_service", "VARCHAR"),
        _c("far_broker_instance", "VARCHAR", guid=True),
        _c("lifetime", "TIMESTAMP"),
        _c("state", "VARCHAR"),
        _c("send_sequence", "BIGINT"),
        _c("receive_sequence", "BIGINT"),
        _c("receive_sequence_frag", "INTEGER"),
        _c("transmission_retry_count", "INTEGER"),
        _c("error_code", "INTEGER"),
        _c("create_date", "TIMESTAMP"),
    ), required=False, note=_CONVERSATION_NOTE),
    Table("transmission_queue", (
        _c("database_id", "INTEGER"),
        _c("conversation_handle", "VARCHAR", guid=True),
        _c("to_service_name", "VARCHAR"),
        _c("from_service_name", "VARCHAR"),
        _c("to_broker_instance", "VARCHAR", guid=True),
        _c("service_contract_name", "VARCHAR"),
        _c("message_type_name", "VARCHAR"),
        _c("message_sequence_number", "BIGINT"),
        _c("enqueue_time", "TIMESTAMP"),
        _c("is_end_of_dialog", "BOOLEAN"),
        _c("is_conversation_error", "BOOLEAN"),
        _c("message_body", "BLOB"),
        _c("transmission_status", "VARCHAR"),
    ), required=False, note=_CONVERSATION_NOTE),
)

# Written by export beside the tables: when the state was taken (traffic's "now").
EXPORT_INFO = Table("export_info", (
    _c("exported_at", "TIMESTAMP"),
    _c("schema_version", "INTEGER"),
))

EXPORTED_TABLES: tuple[Table, ...] = (*ROUTING_TABLES, *CONVERSATION_TABLES)

# The input of resolve and impact: one row per conversation. broker_instance may be NULL
# (the conversation names none); begin_time is naive UTC and judges expiry (R1.4).
CONVERSATIONS = Table("conversations", (
    _c("conversation_id", "VARCHAR", guid=True),
    _c("origin", "VARCHAR"),
    _c("service_name", "VARCHAR"),
    _c("broker_instance", "VARCHAR", guid=True),
    _c("begin_time", "TIMESTAMP"),
))

# The output of resolve: the columns of the route_decision() macro
# (sql/catalog/21_route_decision.sql) after the conversation id.
DECISIONS = Table("decisions", (
    _c("conversation_id", "VARCHAR"),
    _c("outcome", "VARCHAR"),
    _c("route", "VARCHAR"),
    _c("address", "VARCHAR"),
    _c("mirror_address", "VARCHAR"),
    _c("database", "VARCHAR"),
    _c("broker_instance", "VARCHAR"),
    _c("match_step", "VARCHAR"),
    _c("choose_step", "VARCHAR"),
    _c("locate_step", "VARCHAR"),
    _c("decided_by", "VARCHAR"),
))

TABLES_BY_NAME: dict[str, Table] = {
    t.name: t for t in (*EXPORTED_TABLES, EXPORT_INFO, CONVERSATIONS, DECISIONS)
}
