"""``pybroker serve --otel`` (or ``PYBROKER_OTEL=1``): the served instance's spans, sent
where OpenTelemetry's own environment variables say (pybroker/docs/otel.md).

When a tracer provider is already installed (``opentelemetry-instrument pybroker serve``,
or an embedding application's), it is used as it is. Otherwise this installs the SDK's,
with the resource ``service.name`` from OTEL_SERVICE_NAME (default "pybroker") and the
exporter OTEL_TRACES_EXPORTER names: ``otlp`` (the default; needs the
opentelemetry-exporter-otlp-proto-http package, which reads OTEL_EXPORTER_OTLP_*),
``console`` (one JSON object per span on stderr) or ``none``.
Nothing here is imported unless tracing is asked for.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pybroker.errors import BrokerError

ENVIRONMENT = "PYBROKER_OTEL"


def wanted(flag: bool) -> bool:
    """--otel, or PYBROKER_OTEL set to 1 (true, yes, on)."""
    return flag or os.environ.get(ENVIRONMENT, "").strip().lower() in ("1", "true", "yes", "on")


def tracer_provider() -> Any:
    """The tracer provider the served instance's spans go to (installed when none is)."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError as exc:
        raise BrokerError(f"--otel needs OpenTelemetry ({exc}): pip install "
                          "'pybroker[otel]'") from None
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    exporter: Any
    if exporter_name == "console":
        exporter = ConsoleSpanExporter(out=sys.stderr)
    elif exporter_name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
        except ImportError:
            raise BrokerError(
                "OTEL_TRACES_EXPORTER=otlp (the default) needs the "
                "opentelemetry-exporter-otlp-proto-http package; install it, or set "
                "OTEL_TRACES_EXPORTER=console (spans on stderr) or none") from None
        exporter = OTLPSpanExporter()
    elif exporter_name == "none":
        exporter = None
    else:
        raise BrokerError(f"OTEL_TRACES_EXPORTER={exporter_name!r}: pybroker serve knows "
                          "otlp, console and none")
    provider = TracerProvider(resource=Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME", "pybroker")}))
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider
