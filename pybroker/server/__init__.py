"""The client server: other processes reach an instance file one process holds.

DuckDB lets one process write a file; the process holding it serves the others (``pybroker
serve FILE``, or ``pybroker.connect(FILE, serve=True)`` / ``serve_clients(instance)`` in an
application), and ``pybroker.connect(FILE)`` in another process connects through it.

- ``protocol``: the client frames and their typed values (sans-I/O: bytes in, events out)
- ``calls``: what a client may call (the whitelist), and how objects and errors travel
- ``session``: one client's calls run on the API objects an embedded caller uses
- ``server``: the I/O (a Unix socket beside the file, TCP when asked; a thread per client)
- ``client``: the proxies a client process uses, with the API of Instance and the rest
- ``snapshot``: a point-in-time copy of the file for DuckDB's own tools
- ``pg_protocol``, ``pg``: the PostgreSQL wire protocol, read-only, for analysts' tools
"""
