"""The exporter's event hooks and its configuration (environment variables).

A fleet's metrics are the operator's business, not one job's, so the exporter
is configured on the machine, not in ``job.toml``; with neither variable set it
does nothing (and imports nothing):

* ``ZEUS_METRICS_ADDRESS=[HOST:]PORT`` serves ``/metrics`` while the job runs
  (HOST defaults to 127.0.0.1; ``0.0.0.0:9464`` lets a Prometheus elsewhere
  scrape it, and needs ``ZEUS_METRICS_TOKEN``: at least 16 characters, which
  every scrape must send as ``Authorization: Bearer TOKEN``, Prometheus'
  ``authorization: {credentials: ...}``). ``ZEUS_METRICS_LINGER=SECONDS`` keeps
  it up that long after the job ends (before the process exits), so the last
  values get scraped;
* ``ZEUS_PUSHGATEWAY=URL`` pushes the job's metrics to a Pushgateway at every
  recurrence's end and at the job's end (grouped by ``zeus_job`` and
  ``instance``, the host name unless ``ZEUS_PUSHGATEWAY_INSTANCE`` says
  otherwise). ``http://user:password@host:9091`` uses basic authentication
  (the password is never shown);
* ``ZEUS_METRICS_NAMES=zeus|dcgm|both`` (default ``zeus``): which names ``/metrics``
  serves: this project's, dcgm-exporter's for the job's GPUs (read at each scrape,
  :mod:`zeus_plugins_prometheus.dcgm`), or both. It needs ``ZEUS_METRICS_ADDRESS``.

A value that is not one of these is bad input: the job stops before its first
recurrence (exit 2) naming the variable and the fix. A Pushgateway that does
not answer, or a port in use, is reported once and never fails the job.
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING, Any

import attrs

from zeus_core import PartMismatch, hookimpl

if TYPE_CHECKING:  # annotations only
    from zeus_core import BuildContext, JobOptions, JobSummary, Measurement, TryRecord

#: the values of ZEUS_METRICS_NAMES
NAMES = ("zeus", "dcgm", "both")
_HOSTPORT = re.compile(r"^(?:(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):)?(?P<port>\d{1,5})$")


@attrs.frozen
class ExporterConfig:
    host: str | None = None
    port: int | None = None
    token: str | None = None  # scrapes must send it (required off loopback)
    linger_s: float = 0.0
    pushgateway: str | None = None
    instance: str = ""
    names: str = "zeus"  # what /metrics serves: "zeus", "dcgm" or "both"


def read_config(env: dict[str, str]) -> ExporterConfig | None:
    """The exporter's configuration from ``env``; None when it is off; PartMismatch for a bad value."""
    from zeus_core.engine import mask_secrets, parse_url  # with a job: no zeus command else needs them

    address = env.get("ZEUS_METRICS_ADDRESS", "").strip()
    gateway = env.get("ZEUS_PUSHGATEWAY", "").strip()
    if not address and not gateway:
        return None
    host = port = None
    if address:
        m = _HOSTPORT.match(address)
        if not m or not 0 < int(m.group("port")) < 65536:
            raise PartMismatch(
                f"ZEUS_METRICS_ADDRESS={address!r}: expected [HOST:]PORT, such as 9464 or 127.0.0.1:9464 "
                "(0.0.0.0:9464 to be scraped from other machines)"
            )
        host = (m.group("host") or "127.0.0.1").strip("[]")
        port = int(m.group("port"))
    token = env.get("ZEUS_METRICS_TOKEN", "").strip() or None
    if token is not None and len(token) < 16:
        raise PartMismatch(
            "ZEUS_METRICS_TOKEN: at least 16 characters (python -c 'import secrets; print(secrets.token_urlsafe(24))' makes one)"
        )
    if host is not None and not _loopback(host) and token is None:
        raise PartMismatch(
            f"ZEUS_METRICS_ADDRESS={address!r} serves /metrics beyond this machine: set "
            "ZEUS_METRICS_TOKEN too (scrapes then send Authorization: Bearer TOKEN), or serve on "
            "127.0.0.1"
        )
    linger_text = env.get("ZEUS_METRICS_LINGER", "0").strip() or "0"
    try:
        linger = float(linger_text)
        if not math.isfinite(linger) or not 0 <= linger <= 3600:
            raise ValueError
    except ValueError:
        raise PartMismatch(
            f"ZEUS_METRICS_LINGER={linger_text!r}: expected seconds in 0..3600 to keep /metrics up after the job ends"
        ) from None
    if gateway:
        try:
            parts = parse_url(gateway)
        except ValueError as e:
            raise PartMismatch(f"ZEUS_PUSHGATEWAY: {e}: expected an http(s) URL such as http://pushgateway:9091") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PartMismatch(f"ZEUS_PUSHGATEWAY={mask_secrets(gateway)!r}: expected an http(s) URL such as http://pushgateway:9091")
    names = env.get("ZEUS_METRICS_NAMES", "").strip() or "zeus"
    if names not in NAMES:
        raise PartMismatch(f"ZEUS_METRICS_NAMES={names!r}: expected one of {', '.join(NAMES)} (the names /metrics serves)")
    if names != "zeus" and port is None:
        raise PartMismatch(
            f"ZEUS_METRICS_NAMES={names}: dcgm-exporter's names are read from the devices at each scrape of /metrics, never "
            "pushed; set ZEUS_METRICS_ADDRESS too (127.0.0.1:9400 is dcgm-exporter's port)"
        )
    instance = env.get("ZEUS_PUSHGATEWAY_INSTANCE", "").strip()
    if not instance:
        import socket

        instance = socket.gethostname()
    return ExporterConfig(host, port, token, linger, gateway or None, instance, names)


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may be any interface
        return False


#: The exporter of the job running in this process (None: off).
_exporter: Any = None


@hookimpl
def zeus_on_job_start(job: JobOptions, context: BuildContext) -> None:
    global _exporter
    config = read_config(dict(os.environ))
    if _exporter is not None:
        _exporter.close()
        _exporter = None
    if config is None:
        return
    from zeus_plugins_prometheus.exporter import Exporter

    dcgm = None
    device = context.parts.get("device") if context is not None else None
    if config.names != "zeus" and device is not None:
        from zeus_plugins_prometheus.dcgm import DcgmSeries

        spec_part = context.spec.parts.get("device") if context.spec is not None else None
        dcgm = DcgmSeries(device, job.name, os.environ, getattr(spec_part, "plugin", None))
    _exporter = Exporter(config, job.name, dcgm)


@hookimpl
def zeus_on_measurement(name: str, measurement: Measurement) -> None:
    if _exporter is not None:
        _exporter.measurement(name, measurement)


@hookimpl
def zeus_on_try_end(record: TryRecord) -> None:
    if _exporter is not None:
        _exporter.try_end(record)


@hookimpl
def zeus_on_recurrence_end(recurrence: int, records: list[TryRecord]) -> None:
    if _exporter is not None:
        _exporter.recurrence_end(recurrence, records)


@hookimpl
def zeus_on_job_end(summary: JobSummary) -> None:
    if _exporter is not None:
        _exporter.job_end(summary)
