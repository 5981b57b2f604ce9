"""The grid sources: the shared CSV layout and the general one, bad rows named, values held past a series'
end, the forecast against "the same as now", and Electricity Maps' live API against a fake server on loopback."""

from __future__ import annotations

import json
import math
import threading
import time
import warnings
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from zeus_core.engine.registry import get_registry
from zeus_core.engine.signals import GridError, open_grid
from zeus_core.grid import Grid, GridMeter, Step
from zeus_core.job import GridOptions
from zeus_plugins_grid.forecast import persistence, predict_all
from zeus_plugins_grid.series import GridWarning

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "carbon_intensity"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data/carbon_intensity")
DE = SHARED / "de_2020.csv"


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def grid(tmp_path: Path, **table) -> Grid:
    return open_grid(GridOptions(**table), get_registry(), tmp_path)


def problems(tmp_path: Path, **table) -> str:
    with pytest.raises(GridError) as e:
        grid(tmp_path, **table)
    return str(e.value)


def write(tmp_path: Path, text: str, name: str = "ci.csv") -> str:
    (tmp_path / name).write_text(text)
    return name


# --------------------------------------------------------------------------- the shared layout


def test_the_shared_file_reads_as_a_step_function_in_the_zone_it_is_given(tmp_path):
    g = grid(tmp_path, carbon_intensity=str(DE), timezone="UTC")
    series = g.carbon
    assert len(series) == 37147
    first, last = series.span()
    assert first == utc("2019-12-20 00:00:00") and last == utc("2021-01-09 23:00:00") + 900  # the last row holds its 15 min
    # row 3 of the file: 2019-12-20 00:15:00, 217.8834341330206, holding until 00:30
    (step,) = series.steps(utc("2019-12-20 00:20:00"), utc("2019-12-20 00:25:00"))
    assert step == Step(utc("2019-12-20 00:20:00"), utc("2019-12-20 00:25:00"), 217.8834341330206)
    assert [s.value for s in series.steps(utc("2019-12-20 00:10:00"), utc("2019-12-20 00:20:00"))] == [
        218.29003068829462,
        217.8834341330206,
    ]
    shifted = grid(tmp_path, carbon_intensity=str(DE), timezone="+01:00").carbon  # the same wall-clock times, an hour earlier
    assert shifted.span()[0] == first - 3600


def test_a_zone_that_does_not_fit_the_file_names_the_row_and_naive_times_need_a_zone(tmp_path):
    # The shared files have no gap at 02:00 on 2020-03-29: they are not in Berlin's daylight-saving time.
    msg = problems(tmp_path, carbon_intensity=str(DE), timezone="Europe/Berlin")
    assert "de_2020.csv:9610" in msg and "2020-03-29 02:00:00 does not exist" in msg and "timezone" in msg
    msg = problems(tmp_path, carbon_intensity=str(DE))
    assert "de_2020.csv:2" in msg and "no time zone" in msg and "[grid] carbon_intensity" in msg


# --------------------------------------------------------------------------- the general layout


def test_the_general_layout_offsets_unix_seconds_and_named_columns(tmp_path):
    name = write(
        tmp_path, "region,timestamp,carbon_intensity\nDE,2020-06-01T00:00:00Z,300\nDE,2020-06-01T02:30:00+02:00,200\nDE,1590973200,100\n"
    )
    s = grid(tmp_path, carbon_intensity=name).carbon
    t0 = utc("2020-06-01 00:00:00")
    assert s.span() == (t0, t0 + 5400)  # the last row holds for the file's usual step
    assert [(a - t0, b - t0, v) for a, b, v, _ in s.steps(t0, t0 + 5400)] == [(0, 1800, 300), (1800, 3600, 200), (3600, 5400, 100)]
    prices = write(tmp_path, "time,price\n2020-06-01 00:00,-0.02\n2020-06-01 01:00,0.1\n", "p.csv")  # a price may be negative
    g = grid(tmp_path, price=prices, currency="eur", timezone="UTC")
    assert g.currency == "EUR" and g.price.steps(t0, t0)[0].value == -0.02


@pytest.mark.parametrize(
    "rows, where, words",
    [
        ("2020-06-01 00:00,1\n2020-06-01 00:30,2\n2020-06-01 03:00,3\n", "ci.csv:4", ["150 minutes after row 3", "max_gap_s"]),
        ("2020-06-01 00:00,1\n2020-06-01 00:30,2\n2020-06-01 00:30,3\n", "ci.csv:4", ["repeats row 3", "increase strictly"]),
        ("2020-06-01 00:00,1\n2020-06-01 01:00,2\n2020-06-01 00:30,3\n", "ci.csv:4", ["is earlier than row 3", "sort"]),
        ("2020-06-01 00:00,1\n2020-06-01 00:30,-5\n", "ci.csv:3", ["carbon intensity -5 is negative"]),
        ("2020-06-01 00:00,1\n2020-06-01 00:30,nan\n", "ci.csv:3", ["is nan", "finite"]),
        ("2020-06-01 00:00,1\n2020-06-01 00:30,\n", "ci.csv:3", ["empty value is a gap"]),
        ("2020-06-01 00:00,1\n2020-06-01T00:30:00Z,2\n", "ci.csv:3", ["with and without a zone are mixed", "row 2"]),
        ("2020-06-01 00:00,1\nyesterday,2\n", "ci.csv:3", ["not ISO 8601"]),
    ],
)
def test_bad_rows_are_named_with_the_fix(tmp_path, rows, where, words):
    name = write(tmp_path, "Time,Carbon Intensity\n" + rows)
    msg = problems(tmp_path, carbon_intensity=name, timezone="UTC")
    assert f"[grid] carbon_intensity: {where}:" in msg
    for w in words:
        assert w in msg


def test_a_job_longer_than_the_series_is_charged_at_its_last_value_held_and_warned_once(tmp_path):
    name = write(tmp_path, "Time,Carbon Intensity\n2020-06-01 00:00,400\n2020-06-01 01:00,100\n")
    g = grid(tmp_path, carbon_intensity=name, timezone="UTC")
    t0 = utc("2020-06-01 00:00:00")
    meter = GridMeter(g)
    with pytest.warns(GridWarning, match="ends at 2020-06-01T02:00:00Z.*held") as seen:
        meter.add(t0, t0 + 4 * 3600, 4 * 3.6e6)  # 1 kWh an hour for four hours: 400 + 100 + 100 + 100
        meter.add(t0 + 4 * 3600, t0 + 5 * 3600, 3.6e6)
    assert len(seen) == 1
    assert meter.held_s == 3 * 3600
    assert meter.figures(5 * 3.6e6)["carbon_g"] == pytest.approx(400 + 4 * 100)


def test_a_number_is_a_constant_and_charges_exactly(tmp_path):
    g = grid(tmp_path, carbon_intensity=437.5)
    meter = GridMeter(g)
    energy = 0.0
    for i, joules in enumerate((123456.789, 0.1, 98765.4321)):
        meter.add(1e9 + i * 1000.0, 1e9 + i * 1000.0 + 777.7, joules)
        energy += joules
    assert meter.figures(energy)["carbon_g"] == energy * 437.5 / 3.6e6  # exactly, not approximately
    assert "must be a finite number >= 0" in problems_of_options(carbon_intensity=-1.0)


def problems_of_options(**table) -> str:
    with pytest.raises(ValueError) as e:
        GridOptions(**table)
    return str(e.value)


# --------------------------------------------------------------------------- the forecast


def test_the_forecast_uses_only_the_past_and_beats_the_same_as_now_on_the_shared_data(tmp_path):
    s = grid(tmp_path, carbon_intensity=str(DE), timezone="UTC").carbon
    n = 96 * 30
    starts, values = s.starts[:n], s.values[:n].copy()
    pred = predict_all(starts, values)
    later = values.copy()
    later[n // 2 :] *= 3.0  # change the future: no forecast before it may move
    assert np.array_equal(predict_all(starts, later)[: n // 2 + 1], pred[: n // 2 + 1])
    warm = slice(96 * 3, n)  # after the model's first fit
    model = np.mean(np.abs(pred - values)[warm])
    same = np.mean(np.abs(persistence(values) - values)[warm])
    assert model < 0.8 * same
    step = s.forecast(float(starts[500]) + 60.0)
    assert (step.start, step.end, step.value) == (starts[500], starts[501], pytest.approx(pred[500]))


# --------------------------------------------------------------------------- Electricity Maps, on loopback


class FakeElectricityMaps:
    """The two endpoints the source reads, on 127.0.0.1: ``mode`` ok / down (503) / slow (no answer until
    the fake is closed, a minute at most)."""

    def __init__(self, token: str = "secret-token") -> None:
        self.token, self.mode, self.requests = token, "ok", []
        self.closing = threading.Event()
        hour = math.floor(time.time() / 3600) * 3600
        self.hour = hour
        self.history = [(hour - 3600 * k, v) for k, v in ((3, 400.0), (2, 300.0), (1, 200.0))]
        self.latest = (hour, 100.0)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                fake.requests.append((self.path, self.headers.get("auth-token")))
                if fake.mode == "slow":
                    fake.closing.wait(60.0)
                if fake.mode == "down":
                    return self._send(503, {"error": "maintenance"})
                if self.headers.get("auth-token") != fake.token:
                    return self._send(401, {"error": "bad token"})
                iso = lambda t: datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")  # noqa: E731
                if self.path.startswith("/v3/carbon-intensity/history?zone=DE"):
                    return self._send(200, {"zone": "DE", "history": [{"datetime": iso(t), "carbonIntensity": v} for t, v in fake.history]})
                if self.path.startswith("/v3/carbon-intensity/latest?zone=DE"):
                    return self._send(200, {"zone": "DE", "datetime": iso(fake.latest[0]), "carbonIntensity": fake.latest[1]})
                return self._send(404, {"error": "no such path"})

            def _send(self, code, body):
                data = json.dumps(body).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (the slow mode)
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_em(monkeypatch):
    fake = FakeElectricityMaps()
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", fake.token)
    monkeypatch.setenv("ZEUS_ELECTRICITYMAPS_URL", fake.url)
    yield fake
    fake.close()


def test_live_values_by_the_hour_with_the_token_and_a_cache(tmp_path, fake_em):
    s = grid(tmp_path, carbon_intensity="electricitymaps:DE", refresh_s=300).carbon
    assert fake_em.requests == []  # opening asks nothing
    h = fake_em.hour
    got = s.steps(h - 2.5 * 3600, h + 600)
    assert [(a - h, b - h, v, held) for a, b, v, held in got] == [
        (-9000, -7200, 400.0, False),
        (-7200, -3600, 300.0, False),
        (-3600, 0, 200.0, False),
        (0, 600, 100.0, False),
    ]
    assert {tok for _, tok in fake_em.requests} == {"secret-token"} and len(fake_em.requests) == 2
    s.steps(h, h + 1)
    assert len(fake_em.requests) == 2  # kept for refresh_s
    assert s.forecast(h + 60) == Step(h, h + 3600, 200.0)  # the hour before: the same as now


def test_a_dead_or_slow_service_holds_the_last_value_with_one_warning_and_never_raises(tmp_path, fake_em):
    # a timeout a loaded machine's answers on loopback keep within, and that the slow service's (none) outlasts
    s = grid(tmp_path, carbon_intensity="electricitymaps:DE", refresh_s=0, timeout_s=2.0).carbon
    h = fake_em.hour
    assert s.steps(h, h + 60)[0].value == 100.0
    fake_em.mode = "down"
    with pytest.warns(GridWarning, match="did not answer.*HTTP 503.*holding the last value, 100") as seen:
        for _ in range(3):
            (step,) = s.steps(h + 60, h + 120)
            assert step.value == 100.0 and step.held
    assert len(seen) == 1
    fake_em.mode = "slow"
    began = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert s.steps(h + 120, h + 180)[0].value == 100.0
    assert time.monotonic() - began < 30.0  # the timeout (2 s), not the service (a minute), decides


def test_before_any_answer_nothing_is_charged_and_the_seconds_count_as_held(tmp_path, fake_em, monkeypatch):
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", "wrong")
    g = grid(tmp_path, carbon_intensity="electricitymaps:DE", refresh_s=0)
    meter = GridMeter(g)
    with pytest.warns(GridWarning, match="HTTP 401.*nothing can be charged"):
        meter.add(time.time(), time.time() + 10.0, 1000.0)
    assert meter.figures(1000.0) == {} and meter.held_s == pytest.approx(10.0)


def test_a_live_source_needs_its_token_before_the_job_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    msg = problems(tmp_path, carbon_intensity="electricitymaps:DE")
    assert "[grid] carbon_intensity" in msg and "export ELECTRICITYMAPS_TOKEN" in msg
    monkeypatch.setenv("ELECTRICITYMAPS_TOKEN", "t")
    assert "give a zone" in problems(tmp_path, carbon_intensity="electricitymaps:D E")
    assert "neither a number, nor a file" in problems(tmp_path, carbon_intensity="watttime:CAISO")
