"""The ``electricitymaps`` source: Electricity Maps' live API (``electricitymaps:DE``).

* Token: the ``ELECTRICITYMAPS_TOKEN`` environment variable (sent as the ``auth-token``
  header); a job naming this source without it is refused before it runs.
* Service: ``https://api.electricitymap.org`` (``ZEUS_ELECTRICITYMAPS_URL`` points
  elsewhere: a proxy, or a fake server in tests). Carbon intensity from
  ``/v3/carbon-intensity/latest`` and ``/v3/carbon-intensity/history`` (the last 24
  hours, hourly); price from ``/v3/price-day-ahead/latest`` (its unit, e.g. EUR/MWh,
  must be in ``[grid] currency``; it is turned into per kWh).
* Cache: an answer is kept ``[grid] refresh_s`` seconds (300); each value holds for its
  hour. Each request waits at most ``[grid] timeout_s`` (5 s).
* Down: a request that fails (no answer in time, an HTTP error, a body that is not the
  API's) is warned about once per outage, the last known value holds (charged as held),
  and the service is asked again after ``refresh_s``. Nothing here ever raises into a
  training job; before any answer at all, nothing can be charged (the tries have no
  grid columns and the seconds count as held).
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

from zeus_core.grid import CARBON, SourceRequest, Step
from zeus_core.job import grid_bound_problem
from zeus_plugins_grid.series import warn_once

DEFAULT_URL = "https://api.electricitymap.org"
TOKEN_ENV, URL_ENV = "ELECTRICITYMAPS_TOKEN", "ZEUS_ELECTRICITYMAPS_URL"
HOUR = 3600.0
#: The most bytes of one answer read (an answer is a few kB).
MAX_BODY = 1 << 20


class ServiceError(Exception):
    """The service did not give a usable answer (never leaves this module)."""


class ElectricityMaps:
    """Hourly values of one zone from the live API, cached; the last known value holds when it is down."""

    def __init__(self, zone: str, request: SourceRequest, token: str, base_url: str) -> None:
        self.zone = zone
        self.quantity = request.quantity
        self.currency = request.currency
        self.timeout_s = request.timeout_s
        self.refresh_s = request.refresh_s
        self.token = token
        self.base_url = base_url.rstrip("/")
        self.source = f"electricitymaps:{zone}"
        #: hour start (Unix seconds) -> value
        self.known: dict[float, float] = {}
        self.requests = 0
        self._next_ask = 0.0
        self._down = False
        self._warned: set[str] = set()

    @classmethod
    def open(cls, spec: str, request: SourceRequest) -> ElectricityMaps:
        zone = spec.strip()
        if not zone or not all(c.isalnum() or c in "-_" for c in zone):
            raise ValueError(f"electricitymaps:{spec!r}: give a zone such as electricitymaps:DE or electricitymaps:US-CAL-CISO")
        token = os.environ.get(TOKEN_ENV, "").strip()
        if not token:
            raise ValueError(
                f"electricitymaps:{zone} needs an API token: export {TOKEN_ENV}=... (from the Electricity "
                "Maps API portal), or use a CSV file or a number"
            )
        base = os.environ.get(URL_ENV, "").strip() or DEFAULT_URL
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{URL_ENV}={base!r}: expected an http(s) URL such as {DEFAULT_URL}")
        return cls(zone, request, token, base)

    # -- the service --

    def _get(self, path: str) -> dict:
        url = f"{self.base_url}{path}?{urllib.parse.urlencode({'zone': self.zone})}"
        req = urllib.request.Request(url, headers={"auth-token": self.token, "Accept": "application/json"})
        self.requests += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - http(s) only, checked at open
                body = resp.read(MAX_BODY + 1)
        except urllib.error.HTTPError as e:
            raise ServiceError(f"HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:  # refused, timed out, reset
            raise ServiceError(str(getattr(e, "reason", None) or e) or type(e).__name__) from None
        if len(body) > MAX_BODY:
            raise ServiceError("an answer larger than 1 MiB")
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise ServiceError("an answer that is not JSON") from None

    def _point(self, item: dict, key: str) -> tuple[float, float]:
        try:
            t = datetime.fromisoformat(str(item["datetime"]).replace("Z", "+00:00")).timestamp()
            v = float(item[key])
        except (KeyError, TypeError, ValueError):
            raise ServiceError(f"an answer without datetime and {key}: {str(item)[:120]}") from None
        if not math.isfinite(v) or (self.quantity == CARBON and v < 0):
            raise ServiceError(f"an answer with {key} = {v}")
        return math.floor(t / HOUR) * HOUR, v

    def _fetch(self) -> None:
        if self.quantity == CARBON:
            got = self._get("/v3/carbon-intensity/history")
            history = got.get("history") if isinstance(got, dict) else None
            points = [self._point(h, "carbonIntensity") for h in history] if isinstance(history, list) else []
            points.append(self._point(self._get("/v3/carbon-intensity/latest"), "carbonIntensity"))
        else:
            got = self._get("/v3/price-day-ahead/latest")
            unit = str(got.get("unit", "")) if isinstance(got, dict) else ""
            money, _, energy = unit.partition("/")
            scale = {"MWh": 1e-3, "kWh": 1.0}.get(energy)
            if scale is None or money.upper() != self.currency:
                raise ServiceError(f"a price in {unit!r}, not in {self.currency}/MWh or {self.currency}/kWh ([grid] currency)")
            t, v = self._point(got, "value")
            points = [(t, v * scale)]
        for _, v in points:
            problem = grid_bound_problem(self.quantity, v)
            if problem:
                raise ServiceError(f"an answer of {problem}")
        self.known.update(points)

    def _refresh(self, now: float) -> None:
        if now < self._next_ask:
            return
        self._next_ask = now + self.refresh_s
        try:
            self._fetch()
        except ServiceError as e:
            if not self._down:
                self._warned.discard("down")
            self._down = True
            held = f"holding the last value, {self._latest()[1]:g}" if self.known else "nothing can be charged until it answers"
            warn_once(
                self._warned, "down", f"{self.source}: the service did not answer ({e}); {held}; asking again in {self.refresh_s:g} s"
            )
            return
        if self._down:
            warn_once(self._warned, "back", f"{self.source}: the service answers again")
            self._warned.discard("back")
        self._down = False

    def _latest(self) -> tuple[float, float]:
        hour = max(self.known)
        return hour, self.known[hour]

    # -- GridSignal --

    def steps(self, start: float, end: float) -> list[Step]:
        end = max(start, end)
        self._refresh(time.time())
        if not self.known:
            return [Step(start, end, math.nan, True)]
        hours = sorted(self.known)
        latest = hours[-1]
        out: list[Step] = []
        t = start
        while True:
            hour = math.floor(t / HOUR) * HOUR
            value = self.known.get(hour)
            held = value is None
            if value is None:  # not known (held): the nearest known hour before (or the first one)
                before = [h for h in hours if h <= hour]
                value = self.known[before[-1] if before else hours[0]]
            stop = min(end, hour + HOUR) if hour <= latest else end  # past the latest hour: one held step
            held = held or self._down and hour >= latest
            out.append(Step(t, stop, value, held))
            if stop >= end:
                return out
            t = stop

    def forecast(self, at: float) -> Step:
        """The hour containing ``at``, at the value of the latest hour before it (the same as now)."""
        hour = math.floor(at / HOUR) * HOUR
        self._refresh(time.time())
        before = [h for h in self.known if h < hour]
        if not before:
            value = self.known.get(hour, math.nan)
        else:
            value = self.known[max(before)]
        return Step(hour, hour + HOUR, value)
