"""Between instances (SPEC P1-P9): a sans-I/O protocol core and the one module that does
the I/O.

- ``frames``: the frame format (encode, incremental bounded decode). Beside it, by
  concern: ``frame_types`` (the frames as values, their codes and limits),
  ``frame_fields`` (fields and headers), ``frame_macs`` (MACs and the sending path of a
  fragment).
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
  It composes two services: ``transport_forwarding`` (forwarding's I/O) and
  ``transport_mirroring`` (mirrored routes' probes), each given what it uses; beside them
  ``transport_connections`` (the connections and their dialog keys), ``transport_trust``
  (the trusted certificates, TLS contexts and shared secrets), ``transport_sockets`` (the
  words for sockets and their errors), ``transport_settings`` (its settings and its sink);
  ``addresses`` parses endpoint addresses.
- ``fuzzing``: the receive path's fuzz target and a generator of valid and mutated frames.

The core takes ``now`` (epoch seconds) as an argument and exposes its deadlines with
``get_timer()``; it imports neither asyncio, ssl, sockets nor duckdb. Nothing here imports
the storage or the messaging engine: what applies arrivals to DuckDB is the broker
endpoint (pybroker.kernel.broker_endpoint), above this package.

Choices where Service Broker's documentation is silent:

- The frames are pybroker's own (SQL Server's are unpublished): HELLO, MESSAGE, ACK, NOTICE,
  KEEPALIVE, CLOSE; headers up to 16 KiB, bodies up to 16 MiB; anything malformed is a
  ``FrameError`` that closes the connection.
- Fragments are 1 MiB (``start_endpoint(fragment_size=...)``); conversations take turns one
  fragment at a time (P4.3). The receiver keeps each fragment as it arrives (acknowledged once
  written) and assembles the message when the last one arrives.
- An acknowledgement says "everything below sequence N, and these fragment ranges". It goes
  back after the receiving transaction committed, riding on a fragment going the other way
  when one leaves within 5 ms, else as an ACK frame. Duplicates are acknowledged again, never
  queued again. The sender applies acknowledgements at most every 20 ms.
- Flow control: at most 32 MiB unacknowledged per next hop, 2,048 messages past the lowest
  unacknowledged one per conversation direction, 4 MiB buffered per socket.
- Only the unacknowledged fragment is resent, after 4, 8, 16, 32, then every 64 s
  (``retry_scale``); after a restart every unacknowledged message goes again.
- One outbound connection per next hop, opened on demand; a peer's inbound connection also
  carries our messages to it (only with TLS: without it a HELLO proves nothing). Idle close
  after 90 s, keepalive every 30 s, at most 256 connections, 10 s for TLS and HELLO; a failed
  destination waits 4, 8, 16, 32, then 64 s (times ``retry_scale``) before the next attempt.
- Security: mutual TLS 1.3 with pinned self-signed EC P-256 certificates (only validity dates
  are checked, as SQL Server does). Each fragment, acknowledgement and notice carries a
  16-byte keyed BLAKE2b MAC (P6) under a per-dialog-direction key derived from the two
  certificates' keys (ECDH + HKDF, then HMAC-SHA256 of conversation id and direction): no key
  crosses the network. A mismatch is discarded with a ``Broker:Corrupted Message`` event.
- A target that cannot take a message records ``Broker:Message Undeliverable`` and sends a
  notice: fatal ones (-8408, -8462, -8495) end the sender's side with that error; others
  become its ``transmission_status`` while it retries.
- Forwarding (R7): a message starts with 32 hops (far above any real chain of forwarders,
  and a loop ends within moments) and a 60 s time to live counted only while forwarders hold
  it (just under the longest retry interval, after which a fresher copy replaces it). A
  forwarder counts body bytes plus 256 per fragment against ``forwarding_size_mb`` and
  releases them once written to the next hop's connection. MAC keys belong to the two
  certificates of a connection (the sender cannot know the final destination's certificate
  before its first acknowledgement), so a forwarder checks each frame under the key it shares
  with the hop it came from and re-signs it for the next. It remembers the way back for at
  most 65,536 conversation directions (least recently used forgotten: a lost entry costs one
  relayed acknowledgement, which the sender's retry brings again).
"""
