"""Route definitions and the rules of SPEC R10: what a route may say, checked before any
row is written, each error naming the rule it enforces."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from pybroker.arguments import text_problem
from pybroker.errors import InvalidArgumentError, RouteDefinitionError

MAX_NAME_LENGTH = 128  # sysname: database, queue and route names
MAX_VALUE_LENGTH = 256  # R10.2: route values (and service names, nvarchar(256))

# R10.1: tcp://host:port with an optional trailing '/', the scheme in any case. A host is a
# DNS name, an IPv4 address or a bracketed IPv6 address.
_NETWORK_ADDRESS = re.compile(
    r"^(?i:tcp)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.\-_]*[A-Za-z0-9])?)"
    r":(?P<port>[0-9]{1,5})/?$"
)


def check_name(kind: str, name: object, limit: int = MAX_NAME_LENGTH) -> str:
    """A name must be a non-empty string of at most ``limit`` characters."""
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{kind} name must be a string, not {type(name).__name__}")
    if not name or not name.strip():
        raise InvalidArgumentError(f"{kind} name must not be empty")
    if len(name) > limit:
        raise InvalidArgumentError(
            f"{kind} name is {len(name)} characters long; at most {limit} are allowed"
        )
    problem = text_problem(name)
    if problem is not None:
        raise InvalidArgumentError(f"{kind} name is not valid text: {problem}")
    return name


def normalize_guid(value: object, what: str = "broker_instance") -> str:
    """A broker identifier is a GUID; pybroker keeps it as lowercase text."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a GUID string, not {type(value).__name__}")
    try:
        parsed = uuid.UUID(value.strip())
    except ValueError:
        raise InvalidArgumentError(
            f"{what} {value!r} is not a GUID (expected the form "
            "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
        ) from None
    return str(parsed)


def parse_network_address(address: str) -> tuple[str, int] | None:
    """(host, port) of a tcp:// address, or None when it is not one."""
    match = _NETWORK_ADDRESS.match(address)
    if not match:
        return None
    port = int(match.group("port"))
    if not 0 < port < 65536:
        return None
    return match.group("host").lower(), port


_HOST = re.compile(
    r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.\-_]*[A-Za-z0-9])?)$"
)


def address_problem(address: str) -> str:
    """What is wrong with a network address that ``parse_network_address`` refuses."""
    scheme, sep, rest = address.partition("://")
    if not sep or scheme.lower() != "tcp":
        return "a network address begins with tcp://"
    if rest.endswith("/"):
        rest = rest[:-1]
    if rest.startswith("["):
        close = rest.find("]")
        host, tail = (rest, "") if close < 0 else (rest[: close + 1], rest[close + 1 :])
    else:
        host, colon, port_text = rest.partition(":")
        tail = colon + port_text
    if "/" in tail:
        return "only a trailing '/' may follow the port"
    if not host:
        return "the host is missing"
    if not _HOST.match(host):
        return (f"the host {host!r} is not a DNS name, an IPv4 address or a bracketed IPv6 "
                "address")
    if not tail.startswith(":") or len(tail) == 1:
        return "the port is missing (write tcp://host:port, by convention port 4022)"
    port_text = tail[1:]
    if not port_text.isascii() or not port_text.isdigit():
        return f"the port {port_text!r} is not a number"
    port = int(port_text)
    if not 0 < port < 65536:
        return f"the port {port} is outside 1-65535"
    return "it is not of the form tcp://host:port"  # pragma: no cover - parse would accept


@dataclass(frozen=True, slots=True)
class RouteDefinition:
    """A route as validated, ready to store. lifetime is seconds from now (None: never)."""

    name: str
    address: str
    service_name: str | None = None
    broker_instance: str | None = None
    lifetime: int | None = None
    mirror_address: str | None = None


def _value(clause: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RouteDefinitionError(
            f"{clause} must be a string, not {type(value).__name__}", rule="R10.2"
        )
    if value == "":
        raise RouteDefinitionError(f"{clause} must not be an empty string", rule="R10.2")
    if len(value) > MAX_VALUE_LENGTH:
        raise RouteDefinitionError(
            f"{clause} is {len(value)} characters long; at most {MAX_VALUE_LENGTH} are allowed",
            rule="R10.2",
        )
    problem = text_problem(value)
    if problem is not None:
        raise RouteDefinitionError(f"{clause} is not valid text: {problem}", rule="R10.2")
    return value


def validate_route(
    name: object,
    *,
    address: object,
    service_name: object = None,
    broker_instance: object = None,
    lifetime: object = None,
    mirror_address: object = None,
) -> RouteDefinition:
    """Check a whole route against R10.1/R10.2 and return it normalized.

    LOCAL and TRANSPORT are stored in upper case (the matching SQL compares exactly); network
    addresses are kept as written, as sys.routes shows them.
    """
    route_name = check_name("route", name)
    addr = _value("ADDRESS", address)
    if addr is None:
        raise RouteDefinitionError("ADDRESS is required", rule="R10.1")
    service = _value("SERVICE_NAME", service_name)
    broker = _value("BROKER_INSTANCE", broker_instance)
    mirror = _value("MIRROR_ADDRESS", mirror_address)

    if addr.upper() in ("LOCAL", "TRANSPORT"):
        addr = addr.upper()
    elif parse_network_address(addr) is None:
        raise RouteDefinitionError(
            f"ADDRESS {addr!r} is none of 'LOCAL', 'TRANSPORT' or tcp://host:port: "
            f"{address_problem(addr)}",
            rule="R10.2",
        )
    if broker is not None:
        if service is None:
            raise RouteDefinitionError(
                "BROKER_INSTANCE requires SERVICE_NAME", rule="R10.2"
            )
        try:
            broker = normalize_guid(broker, "BROKER_INSTANCE")
        except InvalidArgumentError as exc:
            raise RouteDefinitionError(str(exc), rule="R10.2") from None
    if addr == "TRANSPORT" and service is not None:
        raise RouteDefinitionError(
            "a TRANSPORT route must not name a SERVICE_NAME (the service name itself carries "
            "the address, R10.6)",
            rule="R10.2",
        )
    if mirror is not None:
        if service is None:
            raise RouteDefinitionError("MIRROR_ADDRESS requires SERVICE_NAME", rule="R10.2")
        if addr in ("LOCAL", "TRANSPORT"):
            raise RouteDefinitionError(
                f"MIRROR_ADDRESS cannot be used with ADDRESS = '{addr}'", rule="R10.2"
            )
        mirror_parts = parse_network_address(mirror)
        if mirror_parts is None:
            raise RouteDefinitionError(
                f"MIRROR_ADDRESS {mirror!r} is not a tcp://host:port address: "
                f"{address_problem(mirror)}", rule="R10.2"
            )
        if mirror_parts == parse_network_address(addr):
            raise RouteDefinitionError(
                "MIRROR_ADDRESS must differ from ADDRESS", rule="R10.2"
            )
    seconds = check_lifetime(lifetime)
    return RouteDefinition(route_name, addr, service, broker, seconds, mirror)


def check_lifetime(lifetime: object) -> int | None:
    """R10.1/R10.2: LIFETIME is a positive whole number of seconds, or omitted."""
    if lifetime is None:
        return None
    if isinstance(lifetime, bool) or not isinstance(lifetime, int):
        raise RouteDefinitionError(
            f"LIFETIME must be a positive whole number of seconds, not {lifetime!r}",
            rule="R10.2",
        )
    if lifetime <= 0:
        raise RouteDefinitionError(
            f"LIFETIME must be a positive whole number of seconds, not {lifetime}",
            rule="R10.2",
        )
    if lifetime > 2**31 - 1:
        raise RouteDefinitionError(
            f"LIFETIME {lifetime} is larger than the largest allowed, {2**31 - 1} seconds",
            rule="R10.2",
        )
    return lifetime
