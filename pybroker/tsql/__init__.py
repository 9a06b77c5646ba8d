"""T-SQL that ``Database.execute()`` runs: route DDL (SPEC R10)."""

from pybroker.tsql.route_ddl import AlterRoute, CreateRoute, DropRoute, Statement, parse_batch

__all__ = ["AlterRoute", "CreateRoute", "DropRoute", "Statement", "parse_batch"]
