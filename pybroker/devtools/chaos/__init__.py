"""Proof under faults: a fault-injection TCP proxy (``proxy``), the instances as
child processes (``node``), a nemesis that kills, pauses and faults them (``runner``), the
Jepsen-style total-queue checker (``checker``, pure) and the wire decoders' fuzz targets
(``fuzz_wire``); ``topology`` runs it through forwarders and across a mirrored pair's
failover, whose rule is ``checker_failover``'s. ``pybroker chaos run`` and ``pybroker chaos
fuzz`` are the commands."""
