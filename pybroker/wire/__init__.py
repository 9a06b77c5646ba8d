"""Between instances (SPEC P1-P9): a sans-I/O protocol core and the one module that does
the I/O.

- ``frames``: the frame format (encode, incremental bounded decode, MACs).
- ``dialog``: per conversation direction: fragmenting, acknowledgement bookkeeping,
  retransmission timers (P3-P5); the receiver's reassembly decisions.
- ``adjacent``: one connection to an adjacent broker: handshake, framing, batching of
  acknowledgements, keepalive, idle close (P2).
- ``certificates``: endpoint certificates and the dialog session keys (P6).
- ``forwarding``: forwarding's decisions: hops, time to live, the memory bound (R7).
- ``mirrored_route``: which partner of a mirrored pair is principal: probes, answers,
  back-off (R9).
- ``transport``: the only module that touches sockets, TLS and the clock (asyncio in a
  background thread); it feeds bytes to the core and hands arrivals to the messaging engine.
  Its parts by concern: ``forwarder`` (forwarding's I/O), ``mirroring_io`` (mirrored
  routes' probes), ``socket_words`` (addresses and error texts of sockets), ``addresses``.

The core takes ``now`` (epoch seconds) as an argument and exposes its deadlines with
``get_timer()``; it imports neither asyncio, ssl, sockets nor duckdb. Nothing here imports
the storage or the messaging engine: what applies arrivals to DuckDB is the broker
endpoint (pybroker.broker_endpoint), above this package.
"""
