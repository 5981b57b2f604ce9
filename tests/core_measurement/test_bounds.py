"""How a figure was measured and how sure it is, in the core (issue 37 item 1): the bound of each
method, a window's scope and bound per device, and where they appear in the outputs (after every
existing column and key, so that a reader of the old ones reads what it read)."""

from __future__ import annotations

import csv
import io
import json
import math
import time

import pytest

from zeus_core.device import Precision
from zeus_core.engine.ranks import combine_measurements
from zeus_core.measurement import Measurement, energy_method, format_bound
from zeus_core.results import ENERGY_COLUMNS, ENERGY_KEY, TRY_COLUMNS, JobSummary, TryRecord, try_columns
from zeus_core.windows import DeviceSet, Monitor


class Rail:
    """A real-time device drawing constant power, saying how it measures (or not, ``precision=None``)."""

    clock = staticmethod(time.monotonic)

    def __init__(self, name: str, watts: float, precision: Precision | None) -> None:
        self.names = [name]
        self.energy_sources = {name: precision.method if precision else "counter"}
        self.max_power_w = 300.0
        self._watts, self._t0 = watts, time.monotonic()
        if precision is not None:
            self.energy_precision = {name: precision}

    def read_energy(self) -> dict[str, float]:
        return {self.names[0]: self._watts * (time.monotonic() - self._t0)}

    def close(self) -> None:
        pass


def test_old_constructor_calls_keep_working_and_an_unknown_bound_is_nan_never_zero():
    m = Measurement(1.0, {"gpu0": 10.0, "cpu0-package": 5.0}, {"gpu0": "counter", "cpu0-package": "polling"})
    assert m.scopes == {} and m.errors == {}
    assert math.isnan(m.error_j()) and m.method == "mixed:counter+polling"
    m = Measurement(1.0, {"gpu0": 10.0}, {"gpu0": "counter"}, errors={"gpu0": 0.5})
    assert m.error_j() == 0.5 and m.error_j(["gpu0"]) == 0.5


def test_energy_method_names_one_method_or_the_mix():
    assert energy_method(["counter", "counter"]) == "counter"
    assert energy_method(["polling", "counter", ""]) == "mixed:counter+polling"
    assert energy_method(["mixed:counter+polling", "estimate"]) == "mixed:counter+estimate+polling"
    assert energy_method([]) == ""


def test_format_bound():
    assert format_bound(1234.0, 3.0) == "1.234 kJ ± 3 J"
    assert format_bound(5e6, 1234.0) == "5.000 MJ ± 1.2 kJ"
    assert format_bound(12.0, math.nan) == "12.000 J ± ?"


def test_each_methods_bound():
    counter = Precision("counter", "gpu", 400.0, period_s=0.1, resolution_j=0.001)
    assert counter.bound_j(0.5, 100.0) == counter.bound_j(50.0, 1e4) == pytest.approx(40.001)  # the window's length does not matter
    polled = Precision("polling", "gpu", 400.0, period_s=0.05)
    assert polled.covered() == 1.0 and polled.bound_j(10.0, 0.0) == pytest.approx(2 * 400 * 0.05)
    part_time = polled._replace(sensor_period_s=0.1, coverage=0.25)
    assert part_time.covered() == 0.25
    assert part_time.bound_j(10.0, 0.0) == pytest.approx(2 * 400 * 0.15 + 0.75 * 400 * 10)
    # polled less often than the reading refreshes: each poll sees one refresh of several
    assert Precision("polling", "gpu", 400.0, period_s=0.5, sensor_period_s=0.1).covered() == pytest.approx(0.2)
    averaged = polled._replace(average_s=1.0)
    assert averaged.bound_j(10.0, 0.0) == pytest.approx(2 * 400 * 0.05 + 400 * 0.5)
    assert Precision("estimate", "cpu_package", 100.0, relative=0.1).bound_j(3.0, 50.0) == pytest.approx(5.0)
    assert math.isnan(Precision("estimate", "cpu_package", 100.0).bound_j(3.0, 50.0))


def test_windows_carry_scope_and_bound_per_device_and_a_device_set_merges_them():
    counted = Rail("gpu0", 200.0, Precision("counter", "module", 400.0, period_s=0.1, resolution_j=0.001))
    unsaid = Rail("cpu0-package", 50.0, None)
    mon = Monitor(DeviceSet([counted, unsaid]), sync="none", target_error=None)
    mon.begin_window("w")
    time.sleep(0.05)
    m = mon.end_window("w")
    assert m.scopes == {"gpu0": "module", "cpu0-package": "cpu_package"}  # said, else from the name
    assert m.errors["gpu0"] == pytest.approx(40.001) and math.isnan(m.errors["cpu0-package"])
    # ranks' windows combined keep each device's bound under its new name
    both = combine_measurements([m, m])
    assert both.errors["gpu1"] == pytest.approx(40.001) and both.scopes["rank1/cpu0-package"] == "cpu_package"


def _record(i: int, accuracy: dict | None) -> TryRecord:
    return TryRecord(1, i, 32, 250.0, 2, 10.0, 1000.0, 1.0, True, extra={} if accuracy is None else {ENERGY_KEY: accuracy})


def test_recurrences_csv_and_summary_json_append_method_and_bound_after_everything_else():
    records = [_record(1, {"method": "counter", "error_j": 4.0}), _record(2, {"method": "polling", "error_j": 6.0})]
    records[1].extra["scheduler"] = {"slurm_job_id": "7"}
    columns = try_columns(records)
    assert columns == [*TRY_COLUMNS, "slurm_job_id", *ENERGY_COLUMNS]
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=columns)
    w.writeheader()
    for r in records:
        w.writerow(r.row())
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [(r["energy_method"], r["energy_error_j"]) for r in rows] == [("counter", "4.0"), ("polling", "6.0")]
    summary = JobSummary("j", 1, 2, 2000.0, 20.0, 2.0, {}, records=records)
    body = summary.to_json()
    assert list(body)[-2:] == ["energy_method", "energy_error_j"]
    assert body["energy_method"] == "mixed:counter+polling" and body["energy_error_j"] == 10.0
    json.dumps(body, allow_nan=False)
    # a try that recorded no bound (an older store's) makes the job's unknown: null, never a smaller sum
    older = [*records, _record(3, None)]
    assert older[2].row()["energy_method"] == "" and older[2].row()["energy_error_j"] == ""
    assert JobSummary("j", 1, 3, 3000.0, 30.0, 3.0, {}, records=older).to_json()["energy_error_j"] is None


def test_update_period_from_the_changes_seen():
    """The core's inference (the nvml device's at open, and zeus-compat's upstream ``infer_counter_update_period``)."""
    from zeus_core.devicekit import update_period

    changes = [0.0, 0.1, 0.25, 0.35]
    assert update_period(changes, 0.01) == pytest.approx(0.16)  # the longest interval and a step: an upper bound
    assert update_period(changes, shortest=True) == pytest.approx(0.1)  # upstream's choice
    assert update_period([0.0, 0.1], 0.01) is None and update_period([0.0, 0.1], shortest=True) == pytest.approx(0.1)
    assert update_period([0.0], shortest=True) is None


def test_the_closing_table_of_zeus_run_and_zeus_report_shows_the_bound_where_every_try_has_one():
    from rich.console import Console

    from zeus_core.cli.main import _closing_table

    def shown(records: list[TryRecord]) -> str:
        console = Console(record=True, width=200)
        console.print(_closing_table(JobSummary("j", 1, len(records), 1000.0 * len(records), 10.0, 1.0, {}, records=records)))
        return console.export_text()

    known = shown([_record(1, {"method": "counter", "error_j": 4.0}), _record(2, {"method": "counter", "error_j": 6.0})])
    total = next(line for line in known.splitlines() if "total" in line)
    assert "2.00 kJ ± 10.0 J" in total  # the sum of the tries' bounds
    unknown = shown([_record(1, {"method": "counter", "error_j": 4.0}), _record(2, None)])
    assert "±" not in unknown  # one try without a bound: no bound claimed for the sum


def test_a_counters_unit_error_grows_with_its_energy_and_caps_the_bound_a_window_can_meet():
    """A counter whose unit is off by ``scale`` (AMD: 15.3 µJ applied to counts of 2**-16 J) is off by that share of
    any window's energy on top of its edges: a longer window meets a bound down to ``scale``, none below it."""
    p = Precision("counter", "gpu", 400.0, period_s=0.1, resolution_j=0.001, scale=0.005)
    assert p.bound_j(10.0, 1000.0) == pytest.approx(40.001 + 5.0)
    assert p.min_window_s(0.01, 250.0) == pytest.approx(40.001 / (0.005 * 250.0))
    assert p.min_window_s(0.005, 250.0) == math.inf
    assert p._replace(scale=0.0).bound_j(10.0, 1000.0) == pytest.approx(40.001)  # an exact unit: the edges alone
