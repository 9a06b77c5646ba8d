"""The mirrored-route core (R9.2-R9.4), sans-I/O, with a fake clock: who is asked, when,
and where a pair's messages go after each answer."""

from __future__ import annotations

import dataclasses
import itertools
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.core.wire import frame_macs, frames
from pybroker.core.wire.adjacent import AdjacentConnection, PeerHello, ProbeReceived
from pybroker.core.wire.dialog import Transmitter
from pybroker.core.wire.mirrored_route import (
    MIRROR,
    NO_PRINCIPAL,
    PRINCIPAL,
    PRINCIPAL_KNOWN,
    PROBING,
    MirroredRoutes,
    is_pair_key,
    pair_key,
    split_pair_key,
)
from pybroker.errors import WireError

A, B = "tcp://a.example:4022/", "TCP://b.example:4022"
HOP_A, HOP_B = "tcp://a.example:4022", "tcp://b.example:4022"
KEY = pair_key(A, B)
DIALOG = ("6f1c1d2e-0000-4000-8000-000000000001", True)


def routes(scale: float = 1.0) -> MirroredRoutes:
    return MirroredRoutes(retry_scale=scale, probe_timeout=10.0)


def first_use(m: MirroredRoutes, now: float = 0.0) -> dict[str, str]:
    """The pair's first use: one probe to each partner, at once (R9.2); hop -> probe id."""
    m.use(KEY, "StockService", None, DIALOG, now)
    probes = m.probes_due(now)
    assert sorted(p.hop for p in probes) == [HOP_A, HOP_B]
    assert {p.service for p in probes} == {"StockService"}
    return {p.hop: p.probe_id for p in probes}


def test_pair_keys_are_never_addresses():
    assert is_pair_key(KEY) and not is_pair_key(A)
    assert split_pair_key(KEY) == (A, B)
    with pytest.raises(WireError):
        split_pair_key(A)


def test_R9_2_the_first_use_asks_both_and_then_only_the_principal_is_used():
    m = routes()
    asked = first_use(m)
    assert m.route(KEY).state == PROBING and m.route(KEY).principal_hop is None
    changes = m.on_answer(asked[HOP_B], PRINCIPAL, 1.0)
    assert [(c.state, c.principal, c.hop) for c in changes] == [(PRINCIPAL_KNOWN, B, HOP_B)]
    route = m.route(KEY)
    assert (route.principal_hop, route.since) == (HOP_B, 1.0)
    # the other's late answer changes nothing; nobody is asked again while B serves
    assert m.on_answer(asked[HOP_A], MIRROR, 2.0) == []
    assert m.probes_due(1000.0) == [] and m.get_timer() is None
    # a second conversation on the pair goes to the principal straight away
    assert m.use(KEY, "StockService", None, ("other", True), 3.0).principal_hop == HOP_B
    # the partner being unreachable while the principal serves changes nothing
    assert m.on_unreachable(HOP_A, 4.0, "refused") == []


def test_R9_3_principal_unreachable_then_the_partner_that_claims_it_gets_the_messages():
    m = routes()
    asked = first_use(m)
    m.on_answer(asked[HOP_A], PRINCIPAL, 1.0)
    changes = m.on_unreachable(HOP_A, 50.0, "111(Connection refused.)")
    assert [(c.state, c.hop) for c in changes] == [(PROBING, None)]
    assert m.get_timer() == 50.0  # both asked again at once
    again = {p.hop: p.probe_id for p in m.probes_due(50.0)}
    assert sorted(again) == [HOP_A, HOP_B]
    # nothing goes anywhere until B says it is the new principal
    assert m.route(KEY).principal_hop is None
    assert m.on_answer(asked[HOP_B], PRINCIPAL, 51.0) == []  # a stale probe's answer
    changes = m.on_answer(again[HOP_B], PRINCIPAL, 52.0)
    assert [(c.state, c.hop) for c in changes] == [(PRINCIPAL_KNOWN, HOP_B)]


def test_R9_3_principal_says_it_is_no_longer_principal():
    m = routes()
    asked = first_use(m)
    m.on_answer(asked[HOP_A], PRINCIPAL, 1.0)
    assert m.on_not_principal(HOP_B, 2.0, "mirror") == []  # not the principal: no news
    changes = m.on_not_principal(HOP_A, 3.0, "The target database is the mirror")
    assert [c.state for c in changes] == [PROBING]
    again = {p.hop: p.probe_id for p in m.probes_due(3.0)}
    m.on_answer(again[HOP_A], MIRROR, 3.1)
    assert m.route(KEY).state == PROBING  # B has not answered yet
    assert m.on_answer(again[HOP_B], PRINCIPAL, 3.2)[0].hop == HOP_B


def test_R9_4_neither_claims_it_nothing_is_sent_and_both_are_asked_again_with_back_off():
    m = routes(scale=0.5)
    asked = first_use(m)
    assert m.on_answer(asked[HOP_A], MIRROR, 1.0) == []
    changes = m.on_unreachable(HOP_B, 2.0, "timed out")
    assert [(c.state, c.principal) for c in changes] == [(NO_PRINCIPAL, None)]
    route = m.route(KEY)
    assert route.principal_hop is None
    assert route.answers == {0: MIRROR, 1: "UNREACHABLE"}
    # A is asked again after 4 s (scaled), B after 8 s: back-off grows with each round
    assert route.due == {0: 1.0 + 2.0, 1: 2.0 + 4.0}
    assert m.get_timer() == 3.0
    pending = m.probes_due(3.0)
    assert [p.hop for p in pending] == [HOP_A] and m.get_timer() == 6.0
    pending += m.probes_due(6.0)
    # rounds go on while nobody claims it, each partner asked further and further apart,
    # up to the longest retransmission interval (R9.4, C5: 64 s, scaled)
    asked_at: dict[str, list[float]] = {HOP_A: [3.0], HOP_B: [6.0]}
    now = 6.0
    for _ in range(16):
        for p in pending:
            m.on_answer(p.probe_id, "", now)
        assert m.route(KEY).state == NO_PRINCIPAL and m.route(KEY).principal_hop is None
        now = m.get_timer()
        pending = m.probes_due(now)
        for p in pending:
            asked_at[p.hop].append(now)
    for times in asked_at.values():
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps == sorted(gaps) and gaps[-1] == 32.0
    assert m.on_answer(pending[0].probe_id, PRINCIPAL, now)[0].state == PRINCIPAL_KNOWN


def test_an_unanswered_probe_times_out_as_an_unreachable_partner():
    m = routes()
    first_use(m, now=0.0)
    assert m.get_timer() == 10.0  # both probes' time-outs
    changes = m.handle_timer(10.0)
    assert [c.state for c in changes] == [NO_PRINCIPAL]
    assert m.route(KEY).answers == {0: "UNREACHABLE", 1: "UNREACHABLE"}
    assert m.handle_timer(10.0) == []  # once


@given(st.lists(st.tuples(st.sampled_from(["answer", "unreachable", "refused", "timer"]),
                          st.sampled_from([0, 1]),
                          st.sampled_from([PRINCIPAL, MIRROR, ""])), max_size=40))
def test_whatever_happens_the_pair_has_a_principal_exactly_when_one_claimed_it(steps):
    """Invariant: messages go to a partner only after that partner's PRINCIPAL answer, and
    a pair with no principal always has a probe due or outstanding (it is never forgotten,
    R9.4)."""
    m = routes(scale=0.01)
    m.use(KEY, "S", None, DIALOG, 0.0)
    now = 0.0
    outstanding: dict[int, str] = {}
    claimed_by: int | None = None
    for kind, partner, role in steps:
        now += 1.0
        for p in m.probes_due(now):
            outstanding[0 if p.hop == HOP_A else 1] = p.probe_id
        before = m.route(KEY).principal
        if kind == "answer" and partner in outstanding:
            m.on_answer(outstanding.pop(partner), role, now)
            if role == PRINCIPAL and before is None:
                claimed_by = partner
        elif kind == "unreachable":
            outstanding.pop(partner, None)
            m.on_unreachable((HOP_A, HOP_B)[partner], now, "x")
        elif kind == "refused":
            m.on_not_principal((HOP_A, HOP_B)[partner], now, "x")
        else:
            m.handle_timer(now + 20.0)
            now += 20.0
            outstanding.clear()
        route = m.route(KEY)
        if route.principal is None:
            claimed_by = None
            assert m.get_timer() is not None
        else:
            assert route.principal == claimed_by and route.state == PRINCIPAL_KNOWN


@given(st.uuids().map(str), st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s),
       st.none() | st.uuids().map(str), st.booleans(), st.sampled_from(["", PRINCIPAL, MIRROR]))
def test_a_probe_frame_round_trips_and_its_mac_covers_every_field(probe_id, service, broker,
                                                                   is_answer, role):
    key = bytes(range(32))
    probe = frame_macs.sign(frames.Probe(probe_id, service, broker, is_answer, role,
                                         b"12345678"), key)
    back = frames.decode(frames.encode(probe))
    assert back == probe and frame_macs.verify(back, key)
    for changed in (dataclasses.replace(back, role="PRINCIPAL" if role != PRINCIPAL else ""),
                    dataclasses.replace(back, is_answer=not is_answer),
                    dataclasses.replace(back, service=service + "x")):
        assert not frame_macs.verify(changed, key)  # a forged answer is refused (P6)


def test_a_probe_is_held_until_the_peer_logged_in_and_arrives_as_an_event():
    hello = frames.Hello(str(uuid.uuid4()), (), frames.DEFAULT_MAX_BODY)
    a = AdjacentConnection(is_accept=False, hello=hello, now=0.0, sign_ack=lambda e: e)
    b = AdjacentConnection(is_accept=True, hello=hello, now=0.0, sign_ack=lambda e: e)
    probe = frames.Probe(str(uuid.uuid4()), "StockService", None, False, "", bytes(8))
    a.send_probe(probe, 0.0)
    b.receive_data(a.data_to_send(), 0.0)  # a's HELLO only: the probe waits for b's
    assert isinstance(b.next_event(), PeerHello) and b.next_event() is None
    a.receive_data(b.data_to_send(), 0.0)
    b.receive_data(a.data_to_send(), 0.0)
    assert b.next_event() == ProbeReceived(probe)


def test_the_transmitter_moves_a_pairs_conversations_with_what_they_have_in_flight():
    """R9.3: a pair's conversation directions change next hop with their unacknowledged
    fragments (resent to the new principal, counted in flight there)."""
    t = Transmitter(fragment_size=4)
    message = frames.MessageFragment(
        conversation_id=DIALOG[0], from_initiator=True, sequence=0, fragment_number=0,
        fragment_count=1, message_size=8, from_service="ShopService",
        to_service="StockService", from_broker_instance=str(uuid.UUID(int=1)),
        to_broker_instance=None, contract="C", message_type="M", validation="N",
        is_end_of_dialog=False, is_error=False, priority=5, lifetime_ms=0,
        hops_remaining=32, key_id=bytes(8), body=b"12345678")
    t.submit("h", KEY, message)  # waiting for a principal: under the pair's key
    assert t.addresses() == [KEY]
    sent = t.next_fragment(KEY, 0.0)
    assert sent is not None and t.in_flight_bytes(KEY) == 4
    assert t.move([DIALOG, ("gone", True)], HOP_B) == {DIALOG: "h"}
    assert t.addresses() == [HOP_B] and t.in_flight_bytes(HOP_B) == 4
    assert t.in_flight_bytes(KEY) == 0
    assert t.live([DIALOG, ("gone", True)]) == {DIALOG}
