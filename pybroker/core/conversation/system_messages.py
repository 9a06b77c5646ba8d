"""The broker's own messages (C2): the system message types, the broker's error codes and
their descriptions, and the body of an Error message."""

from __future__ import annotations

from xml.sax.saxutils import escape

SYSTEM_PREFIX = "http://schemas.microsoft.com/SQL/ServiceBroker/"
END_DIALOG = SYSTEM_PREFIX + "EndDialog"
ERROR = SYSTEM_PREFIX + "Error"
DIALOG_TIMER = SYSTEM_PREFIX + "DialogTimer"
ERROR_NAMESPACE = SYSTEM_PREFIX + "Error"
DEFAULT = "DEFAULT"

# R8.1: dynamic routing. The request contract and message type are system objects of every
# database (migrations/002); the requesting service and its queue are created in a
# database the first time it sends a route request (pybroker/kernel/messaging/route_requests.py).
BROKER_CONFIGURATION_NOTICE = SYSTEM_PREFIX + "BrokerConfigurationNotice"
MISSING_ROUTE = BROKER_CONFIGURATION_NOTICE + "/MissingRoute"
ROUTE_REQUEST_SERVICE = "SQL/ServiceBroker/BrokerConfigurationRequest"
ROUTE_REQUEST_QUEUE = "sys.BrokerConfigurationRequestQueue"

# C2: broker error codes.
LIFETIME_EXPIRED = -8489
REMOTE_ENDPOINT_CLOSED = -8462
SERVICE_DROPPED = -8490
CONTRACT_NOT_SUPPORTED = -8408


LIFETIME_TEXT = "The conversation lifetime has expired."
ENDPOINT_CLOSED_TEXT = (
    "The remote conversation endpoint is either in a state where no more messages can be "
    "exchanged, or it has been dropped.")
SERVICE_DROPPED_TEXT = "The remote service has been dropped."


def error_body(code: int, description: str) -> bytes:
    """C2: SQL Server's Error message body."""
    return (
        f'<Error xmlns="{ERROR_NAMESPACE}"><Code>{code}</Code>'
        f"<Description>{escape(description)}</Description></Error>"
    ).encode()


# Characters an XML parser would normalize in text, kept as character references.
_KEEP = {"\r": "&#13;"}


def missing_route_body(service_name: str) -> bytes:
    """R8.1: the body of a route request for ``service_name``."""
    return (
        f'<MissingRoute xmlns="{MISSING_ROUTE}">'
        f"<SERVICE_NAME>{escape(service_name, _KEEP)}</SERVICE_NAME></MissingRoute>"
    ).encode()


def parse_missing_route(body: bytes) -> str | None:
    """The service a MissingRoute body names (R8.1), or None if it names none."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    if root.tag != f"{{{MISSING_ROUTE}}}MissingRoute":
        return None
    name = root.findtext(f"{{{MISSING_ROUTE}}}SERVICE_NAME")
    return name if name else None


def parse_error(body: bytes) -> tuple[int | None, str | None]:
    """The code and description of an Error message's body (error_body's form)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(body)
        ns = {"e": ERROR_NAMESPACE}
        code = root.findtext("e:Code", namespaces=ns)
        return (int(code) if code is not None else None,
                root.findtext("e:Description", namespaces=ns))
    except (ET.ParseError, ValueError):
        return None, None
