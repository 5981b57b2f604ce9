"""The metrics of one job, served on ``/metrics`` and/or pushed to a Pushgateway.

Every series carries ``zeus_job`` (the job's name; not ``job``, which
Prometheus and the Pushgateway keep for themselves); device series also carry
``device`` (``gpu0``, ``cpu0-package``, ...).

From each try of this process (counters):

* ``zeus_tries_total{reached}``, ``zeus_recurrences_total``;
* ``zeus_energy_joules_total``, ``zeus_time_seconds_total``, ``zeus_cost_total``
  (the tries' ``energy_j``, ``time_s``, ``cost``, as in ``recurrences.csv``);
* ``zeus_device_energy_joules_total{device}``: each device's energy over its tries.

Where the device says who ran on its GPUs (energy attribution, issue 36), each try's own
process's share as ``recurrences.csv``'s ``energy_attributed_j`` has it, an estimate:
``zeus_attributed_energy_joules_total{basis, pod, namespace, container, hpc_job, slurm_step,
slurm_user}``, labelled with the try's scheduler context (dcgm-exporter's names for Kubernetes and
its HPC job mapping, then Slurm's step and user; ``""`` where unknown) and how the shares were made
(``sm``, ``equal``, ``whole-gpu``). Registered at the first attributed try: a job whose device
cannot say who ran serves no such series.

Beside each energy, its +/- bound in joules (issue 37), a gauge since a bound is not counted
events: ``zeus_device_energy_error_joules{device}`` (the sum of the tries' windows' bounds,
NaN once one was unknown), ``zeus_energy_error_joules`` (the tries' ``energy_error_j``) and,
at the job's end, ``zeus_job_energy_error_joules`` (``summary.json``'s).

Gauges: ``zeus_batch_size`` and ``zeus_power_limit_watts`` (the last try's
knobs), ``zeus_recurrence`` (its number), ``zeus_device_power_watts{device}``
(the mean power of the last epoch); and, at the job's end, the job's totals as
``summary.json`` has them (every try in its store, earlier runs' included):
``zeus_job_energy_joules``, ``zeus_job_time_seconds``, ``zeus_job_cost``,
``zeus_job_tries``, ``zeus_job_recurrences``, and its chosen knobs
``zeus_job_batch_size``, ``zeus_job_power_limit_watts``.

A job with ``[grid]`` also has, next to the energy (each try's energy charged against
the grid over time, as its ``carbon_g`` and ``cost_<currency>`` columns):
``zeus_carbon_grams_total`` (a counter), ``zeus_energy_cost{currency}`` (a gauge: a
price may be negative),
``zeus_carbon_intensity_grams_per_kwh`` (the mean intensity of the last try) and, at
the job's end, ``zeus_job_carbon_grams`` and ``zeus_job_energy_cost{currency}``.

With ``ZEUS_METRICS_NAMES=dcgm`` (or ``both``), ``/metrics`` serves the job's GPUs under
dcgm-exporter's names and labels (:mod:`zeus_plugins_prometheus.dcgm`) instead of (or next
to) these; the Pushgateway still gets these.

What goes wrong (a port taken, a Pushgateway that does not answer) is a warning of the
``zeus.prometheus`` logger, once per kind, and the job goes on.
"""

from __future__ import annotations

import atexit
import logging
import math
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics, make_wsgi_app, push_to_gateway
from prometheus_client.exposition import basic_auth_handler, default_handler

from zeus_core.engine import mask_secrets
from zeus_core.grid import CARBON_COLUMN, INTENSITY_COLUMN
from zeus_plugins_prometheus.dcgm import JOB_LABELS

#: What goes wrong while exporting (the job goes on), below the ``zeus`` loggers (``-q`` hides it).
log = logging.getLogger("zeus.prometheus")


class Exporter:
    def __init__(self, config: Any, job: str, dcgm: Any = None) -> None:
        self.config = config
        self.job = job
        #: the dcgm-named series (:class:`~zeus_plugins_prometheus.dcgm.DcgmSeries`), None unless ZEUS_METRICS_NAMES asks
        self.dcgm = dcgm
        disable_created_metrics()  # no *_created series: a job's counters start with its process
        self.registry = r = CollectorRegistry()
        L, D = ["zeus_job"], ["zeus_job", "device"]
        self.tries = Counter("zeus_tries", "Tries run (training runs at one batch size)", L + ["reached"], registry=r)
        self.recurrences = Counter("zeus_recurrences", "Recurrences ended", L, registry=r)
        self.energy = Counter("zeus_energy_joules", "Energy of the tries (J)", L, registry=r)
        self.time = Counter("zeus_time_seconds", "Time of the tries (s)", L, registry=r)
        self.cost = Counter("zeus_cost", "Cost of the tries (zeus cost metric)", L, registry=r)
        self.device_energy = Counter("zeus_device_energy_joules", "Energy per device over the tries (J)", D, registry=r)
        self.device_error = Gauge(
            "zeus_device_energy_error_joules", "+/- bound on zeus_device_energy_joules_total per device (J; NaN: unknown)", D, registry=r
        )
        self.energy_error = Gauge("zeus_energy_error_joules", "+/- bound on zeus_energy_joules_total (J; NaN: unknown)", L, registry=r)
        self.job_energy_error = Gauge(
            "zeus_job_energy_error_joules", "+/- bound on zeus_job_energy_joules, as summary.json (J; NaN: unknown)", L, registry=r
        )
        self._device_errors: dict[str, float] = {}
        self._tries_error = 0.0
        self.batch_size = Gauge("zeus_batch_size", "Batch size of the last try", L, registry=r)
        self.power_limit = Gauge("zeus_power_limit_watts", "Power limit the last try held (W)", L, registry=r)
        self.recurrence = Gauge("zeus_recurrence", "Number of the last recurrence", L, registry=r)
        self.device_power = Gauge("zeus_device_power_watts", "Mean power of the last epoch per device (W)", D, registry=r)
        self.job_totals = {
            key: Gauge(f"zeus_job_{name}", help_, L, registry=r)
            for key, name, help_ in (
                ("energy_j", "energy_joules", "The job's energy over every try in its store (J), as summary.json"),
                ("time_s", "time_seconds", "The job's time over every try in its store (s), as summary.json"),
                ("cost", "cost", "The job's cost over every try in its store, as summary.json"),
                ("tries", "tries", "The job's tries in its store, as summary.json"),
                ("recurrences", "recurrences", "The job's recurrences in its store, as summary.json"),
            )
        }
        self.job_batch_size = Gauge("zeus_job_batch_size", "The job's chosen batch size (summary.json knobs)", L, registry=r)
        self.job_power_limit = Gauge("zeus_job_power_limit_watts", "The job's chosen power limit (summary.json knobs)", L, registry=r)
        self.carbon = Counter("zeus_carbon_grams", "Emissions of the tries (gCO2eq), charged against [grid] over time", L, registry=r)
        # a gauge, not a counter: a price may be negative (day-ahead markets), so the sum may go down
        self.money = Gauge(
            "zeus_energy_cost",
            "Energy cost of the tries of this process, charged against [grid] price over time",
            L + ["currency"],
            registry=r,
        )
        self.intensity = Gauge(
            "zeus_carbon_intensity_grams_per_kwh", "Mean carbon intensity the last try was charged at (gCO2eq/kWh)", L, registry=r
        )
        self.job_carbon = Gauge(
            "zeus_job_carbon_grams", "The job's emissions over every try in its store (gCO2eq), as summary.json", L, registry=r
        )
        self.job_money = Gauge(
            "zeus_job_energy_cost", "The job's energy cost over every try in its store, as summary.json", L + ["currency"], registry=r
        )
        self._attributed: Counter | None = None  # registered at the first attributed try
        self._warned: set[str] = set()
        self._server = None
        self._ended = False
        if config.port is not None:
            try:
                self._server = _serve_metrics(config.host, config.port, r, config.token, config.names, dcgm)
                atexit.register(self._linger_then_close)
            except OSError as e:
                self._warn("serve", f"cannot serve /metrics on {config.host}:{config.port} ({e.strerror or e}); the job runs without it")
        self._push_handler = default_handler
        self._gateway = None
        if config.pushgateway:
            parts = urlsplit(config.pushgateway)
            netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
            self._gateway = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
            if parts.username or parts.password:
                user, password = parts.username or "", parts.password or ""

                def handler(url, method, timeout, headers, data):
                    return basic_auth_handler(url, method, timeout, headers, data, user, password)

                self._push_handler = handler

    def _warn(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning("%s", mask_secrets(message))

    # -- events --

    def measurement(self, name: str, m: Any) -> None:
        if name == "run":
            errors = getattr(m, "errors", {})
            for device, joules in m.energy.items():
                if joules >= 0:
                    self.device_energy.labels(self.job, device).inc(joules)
                    bound = self._device_errors.get(device, 0.0) + float(errors.get(device, math.nan))
                    self._device_errors[device] = bound
                    self.device_error.labels(self.job, device).set(bound)
        elif name.startswith("epoch-") and m.time > 0:
            for device, joules in m.energy.items():
                self.device_power.labels(self.job, device).set(joules / m.time)

    def try_end(self, r: Any) -> None:
        self.tries.labels(self.job, "true" if r.reached else "false").inc()
        self.energy.labels(self.job).inc(max(float(r.energy_j), 0.0))
        error = getattr(r, "energy_error_j", None)
        self._tries_error += math.nan if error is None else float(error)
        self.energy_error.labels(self.job).set(self._tries_error)
        self.time.labels(self.job).inc(max(float(r.time_s), 0.0))
        self.cost.labels(self.job).inc(max(float(r.cost), 0.0))
        self.batch_size.labels(self.job).set(r.batch_size)
        if r.power_limit is not None:
            self.power_limit.labels(self.job).set(r.power_limit)
        self.recurrence.labels(self.job).set(r.recurrence)
        attributed = getattr(r, "attributed", None)
        if attributed is not None:
            context = getattr(r, "scheduler", None) or {}
            labels = [self.job, str(attributed.get("basis", "")), *(str(context.get(column, "")) for _, column in JOB_LABELS)]
            self._attributed_counter().labels(*labels).inc(max(float(attributed["energy_j"]), 0.0))
        for key, value in r.grid.items():
            if key == CARBON_COLUMN:
                self.carbon.labels(self.job).inc(max(float(value), 0.0))
            elif key == INTENSITY_COLUMN:
                self.intensity.labels(self.job).set(float(value))
            elif key.startswith("cost_"):
                self.money.labels(self.job, key[len("cost_") :].upper()).inc(float(value))

    def _attributed_counter(self) -> Counter:
        if self._attributed is None:
            self._attributed = Counter(
                "zeus_attributed_energy_joules",
                "Estimate (zeus_core.attribution): energy of the GPUs the tries' process shared, charged to it "
                "(its SM share of the active energy and its part of the idle), as recurrences.csv's energy_attributed_j (J)",
                ["zeus_job", "basis", *(label for label, _ in JOB_LABELS)],
                registry=self.registry,
            )
        return self._attributed

    def recurrence_end(self, recurrence: int, records: list) -> None:
        self.recurrences.labels(self.job).inc()
        self.push()

    def job_end(self, summary: Any) -> None:
        for key, gauge in self.job_totals.items():
            gauge.labels(self.job).set(float(getattr(summary, key)))
        accuracy = getattr(summary, "energy_accuracy", None)
        if accuracy is not None:
            error = accuracy()[1]
            self.job_energy_error.labels(self.job).set(math.nan if error is None else float(error))
        for key, value in (getattr(summary, "grid", None) or {}).items():
            if key == CARBON_COLUMN:
                self.job_carbon.labels(self.job).set(float(value))
            elif key.startswith("cost_"):
                self.job_money.labels(self.job, key[len("cost_") :].upper()).set(float(value))
        knobs = summary.knobs or {}
        if knobs.get("batch_size") is not None:
            self.job_batch_size.labels(self.job).set(knobs["batch_size"])
        if knobs.get("power_limit") is not None:
            self.job_power_limit.labels(self.job).set(knobs["power_limit"])
        if self.dcgm is not None:
            self.dcgm.freeze()  # the devices close after this: later scrapes serve this last reading
        self._ended = True
        self.push()

    # -- out --

    def push(self) -> None:
        if self._gateway is None:
            return
        try:
            push_to_gateway(
                self._gateway,
                job="zeus",
                registry=self.registry,
                timeout=5,
                handler=self._push_handler,
                grouping_key={"zeus_job": self.job, "instance": self.config.instance},
            )
        except Exception as e:  # noqa: BLE001 - an observer never fails the job
            self._warn("push", f"cannot push to {self.config.pushgateway} ({type(e).__name__}: {e}); the job goes on")

    def _linger_then_close(self) -> None:
        if self._server is not None and self._ended and self.config.linger_s > 0:
            log.info("/metrics stays up %g s (ZEUS_METRICS_LINGER)", self.config.linger_s)
            time.sleep(self.config.linger_s)
        self.close()

    def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.shutdown()
            server.server_close()


def _serve_metrics(host: str, port: int, registry: CollectorRegistry, token: str | None, names: str = "zeus", dcgm: Any = None) -> Any:
    """``/metrics`` of ``registry`` on a daemon thread (prometheus_client's WSGI app), answering 401
    to a request without ``Authorization: Bearer TOKEN`` when there is a token. With ``names``
    ``dcgm`` or ``both``, ``dcgm``'s series (alone, or after the registry's) in the text format
    0.0.4 whatever the scraper asks: dcgm-exporter's counters carry no ``_total``, which
    OpenMetrics requires. The server; its ``shutdown()`` stops it."""
    import hmac
    import socket
    import threading
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from prometheus_client.exposition import generate_latest

    metrics = make_wsgi_app(registry)
    expected = None if token is None else f"Bearer {token}".encode()

    def app(environ, start_response):
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
        if expected is not None and not hmac.compare_digest(given, expected):
            start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")])
            return [b"a bearer token is required\n"]
        if dcgm is None or names == "zeus":
            return metrics(environ, start_response)
        body = (generate_latest(registry) if names == "both" else b"") + dcgm.render().encode()
        start_response("200 OK", [("Content-Type", "text/plain; version=0.0.4; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:  # scrapes are not the job's output
            pass

    server = make_server(host, port, app, server_class=Server, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, name="zeus-metrics", daemon=True).start()
    return server
