"""The broker endpoint of an instance (SQL Server's Service Broker endpoint, P2): the
orchestration between the wire's sans-I/O core and the messaging engine.

- ``runtime``: a running endpoint: the transport and the one thread that applies what
  arrives through the messaging engine; the instance's certificate and trusted peers.
- ``ddl``: running the ENDPOINT and CERTIFICATE statements of a master batch.
- ``mirroring``: answering a mirrored route's probe from the file, and the snapshot behind
  sys.dm_broker_mirrored_routes (R9).
- ``cli``: the ``serve``, ``cert``, ``trust`` and ``untrust`` commands.

Nothing is imported here, so importing one of them loads no other.
"""
