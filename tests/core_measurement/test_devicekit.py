"""zeus_core.devicekit: what device plugins share (polling, counters, settings paths, driver errors,
served GPUs, simulated driver state, GPU groups), each tested on its own."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time

import pytest

from zeus_core.daemon import DaemonError, OperationFailed, Refused, ServiceConfigError
from zeus_core.devicekit import (
    DriverDevice,
    DriverErrors,
    GpuGroup,
    PowerIntegral,
    Sampler,
    ServedGpus,
    SettingsPath,
    WrappingCounter,
    all_or_list,
    deferred_factory,
    select_gpus,
    simulated,
    watch_period,
)
from zeus_core.devicekit import settings as settings_module
from zeus_core.errors import DeviceError
from zeus_core.journal import RestoreError

# --------------------------------------------------------------------------- polling


def test_power_integral_is_the_trapezoid_rule_with_the_last_power_held():
    e = PowerIntegral()
    assert e.joules("gpu0", 5.0) == 0.0 and e.watts("gpu0") is None  # before its first sample
    e.add("gpu0", 10.0, 100.0)
    e.add("gpu0", 12.0, 200.0)  # 2 s from 100 W to 200 W: 300 J
    assert e.joules("gpu0", 12.0) == pytest.approx(300.0)
    assert e.joules("gpu0", 13.5) == pytest.approx(300.0 + 1.5 * 200.0)  # held since the last sample
    e.add_all(14.0, {"gpu0": 0.0, "gpu1": 50.0})  # the held 200 W is revised: 300 + (200 + 0) / 2 * 2 = 500 J
    assert e.joules("gpu0", 14.0) == pytest.approx(600.0)  # never less than the 600 J answered before
    e.add("gpu0", 20.0, 0.0)
    assert e.joules("gpu0", 20.0) == pytest.approx(600.0)
    assert e.joules("gpu1", 16.0) == pytest.approx(100.0) and e.samples == 5 and e.watts("gpu1") == 50.0


def test_sampler_ticks_keeps_the_last_error_and_stops_for_good():
    calls: list[float] = []
    fail = threading.Event()
    ticked = threading.Event()

    def tick():
        calls.append(time.monotonic())
        ticked.set()
        if fail.is_set():
            raise RuntimeError("sensor gone")

    s = Sampler(0.005, tick, "test-sampler")
    assert ticked.wait(10) and s.error is None and s.alive
    fail.set()
    deadline = time.monotonic() + 10
    while s.error is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    assert str(s.error) == "sensor gone" and s.alive  # an error does not end the thread
    fail.clear()
    while s.error is not None:  # the next good tick clears it
        assert time.monotonic() < deadline
        time.sleep(0.005)
    s.stop()
    n = len(calls)
    time.sleep(0.05)
    assert not s.alive and len(calls) == n  # no tick after stop() returned
    with pytest.raises(ValueError, match="must be positive"):
        Sampler(0, tick, "x")


# --------------------------------------------------------------------------- counters


def test_wrapping_counter_adds_one_range_per_wrap():
    raw = [900]
    c = WrappingCounter("cpu0-package", lambda: raw[0], range_counts=1000, joules_per_count=1e-6, max_w=1000.0)
    for value in (950, 10, 500, 400, 999):  # wraps at 10 and at 400
        raw[0] = value
        c.read()
    assert c.wraps == 2 and c.read() == 999 + 2 * 1000  # the raw value plus one range per wrap, as RAPL counts
    assert c.joules() == pytest.approx((999 + 2000 - 900) * 1e-6)
    assert c.seconds_to_wrap() == pytest.approx(1000 * 1e-6 / 1000.0)


def test_a_decrease_that_cannot_be_a_wrap_is_a_reset_counted_as_nothing():
    raw = [4_000_000_000]
    c = WrappingCounter("gpu0", lambda: raw[0], 1 << 32, 15.3e-6, max_w=1500.0, resets=True)
    raw[0] = 4_000_001_000
    c.read()
    raw[0] = 5  # as a 32-bit wrap: (2**32 - 4_000_001_000 + 5) counts = 4.5 kJ within milliseconds, impossible
    with pytest.warns(UserWarning, match="went back from 4000001000 to 5 counts"):
        c.read()
    assert c.resets == 1 and c.wraps == 0
    raw[0] = 105
    assert c.joules() == pytest.approx((1000 + 100) * 15.3e-6)  # the reset step counts nothing


def test_watch_period_is_a_quarter_of_the_fastest_wrap_within_bounds():
    fast = WrappingCounter("a", lambda: 0, 400_000_000, 1e-6, 1000.0)  # wraps in 0.4 s
    slow = WrappingCounter("b", lambda: 0, 10**12, 1e-6, 1000.0)
    assert watch_period([fast, slow]) == pytest.approx(0.1)
    assert watch_period([slow]) == 60.0 and watch_period([]) == 60.0
    assert watch_period([WrappingCounter("c", lambda: 0, 10, 1e-6, 1000.0)]) == 0.05


# --------------------------------------------------------------------------- driver errors


class LibError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    def __str__(self) -> str:
        return {10: "No Permission", 3: "Not Supported"}.get(self.code, "Unknown Error")


ERRORS = DriverErrors(
    library="LIB",
    exception=LibError,
    code=lambda e: e.code,
    rebuild=LibError,
    status=str,
    no_permission=lambda e: e.code == 10,
    not_supported=lambda e: e.code == 3,
    detail_key="lib_error",
    permission_fix="Run as root.",
)


class Gpu(DriverDevice):
    driver_errors = ERRORS

    def __init__(self, name: str = "gpu0", lo: float = 100.0, hi: float = 300.0, limit: float = 300.0) -> None:
        self.name, self.model, self.uuid = name, "Model X", f"GPU-{name}"
        self.range, self.limit, self.sets = (lo, hi), limit, []

    def power_limit_range(self):
        return self.range

    def power_limit(self):
        return self.limit

    def set_power_limit(self, watts):
        self.sets.append(watts)
        self.limit = watts

    def read_power(self):
        return None if self.name == "gpu1" else 123.0

    def power_domains(self):
        return {"instant": 123.0}

    def temperature(self):
        return None if self.name == "gpu1" else 55.0


def test_driver_device_words_each_failure_with_the_device_and_the_fix():
    g = Gpu()

    def raise_(code):
        raise LibError(code)

    assert g.call("read it", lambda x: x + 1, 1) == 2
    with pytest.raises(
        DeviceError, match=r"^cannot set the limit of gpu0 \(Model X, GPU-gpu0\): LIB refused \(No Permission\)\. Run as root\.$"
    ):
        g.call("set the limit", raise_, 10)
    with pytest.raises(DeviceError, match=r"^gpu0 \(Model X, GPU-gpu0\) does not support this: cannot lock \(LIB: Not Supported\)$"):
        g.call("lock", raise_, 3)
    with pytest.raises(DeviceError, match=r"LIB error: Unknown Error$"):
        g.call("read", raise_, 7)


def test_driver_failures_go_through_the_daemon_and_come_back_as_the_same_exception():
    with pytest.raises(OperationFailed) as got:
        with ERRORS.served("set the limit", "GPU GPU-1"):
            raise LibError(10)
    assert str(got.value) == "cannot set the limit of GPU GPU-1: LIB: No Permission" and got.value.detail == {"lib_error": 10}
    back = ERRORS.from_daemon(DaemonError("x", "failed", {"lib_error": 10}))
    assert isinstance(back, LibError) and back.code == 10
    assert ERRORS.from_daemon(DaemonError("refused", "refused", {})) is None
    assert ERRORS.from_daemon(DaemonError("down", "unreachable")) is None


# --------------------------------------------------------------------------- settings path


def test_settings_path_journals_local_changes_and_says_what_this_process_may(monkeypatch):
    driver = {"limit": 300}
    restored = []

    def restorer(key, original):
        restored.append((key, original))
        driver["limit"] = original

    monkeypatch.setattr(settings_module, "has_capability", lambda bit: False)
    path = SettingsPath("testdrv", restorer, None, 21, ERRORS)
    assert path.path == "local" and path.access == "local, read-only"  # no privilege and no daemon

    def refuse():
        raise LibError(10)

    with pytest.raises(LibError):  # refused, no socket: the driver's error, nothing journaled
        path.change("gpu:1:limit", 300, refuse, ("x.set", {}), ("x.reset", {}))
    assert not path.holds("gpu:1:limit")

    def apply():
        driver["limit"] = 200

    path.change("gpu:1:limit", 300, apply, ("x.set", {}), ("x.reset", {}))
    assert driver["limit"] == 200 and path.holds("gpu:1:limit") and path.access == "local"  # it may, after all
    assert path.restore("gpu:1:limit") and restored == [("gpu:1:limit", 300)] and not path.restore("gpu:1:limit")
    defaults = []
    path.reset("gpu:1:limit", lambda: defaults.append("reset"), ("x.reset", {}))  # not changed: the driver default
    assert defaults == ["reset"]
    path.close()

    monkeypatch.setattr(settings_module, "has_capability", lambda bit: bit == 21)
    assert SettingsPath("testdrv", restorer, None, 21, ERRORS).access == "local"
    monkeypatch.setattr(settings_module, "has_capability", lambda bit: False)
    daemon = SettingsPath("testdrv", restorer, "/nonexistent/zeus.sock", 21, ERRORS)
    assert daemon.path == "daemon" and daemon.access == "daemon"
    with pytest.raises(DaemonError) as e:  # no daemon there: said so, and nothing is held
        daemon.change("gpu:1:limit", 300, apply, ("x.set", {"gpu": "1"}), ("x.reset", {"gpu": "1"}))
    assert e.value.code == "unreachable" and not daemon.holds("gpu:1:limit")
    daemon.close()


def test_a_restore_that_fails_is_reported_and_kept_for_the_next_start(monkeypatch):
    def broken(key, original):
        raise RuntimeError("driver gone")

    path = SettingsPath("testdrv2", broken, None, 21, ERRORS)
    path.change("gpu:2:limit", 250, lambda: None, ("x.set", {}), ("x.reset", {}))
    with pytest.raises(RestoreError, match="driver gone"):
        path.close()
    assert path.holds("gpu:2:limit")  # kept in the journal, for the next start to try again
    path.guard.forget("gpu:2:limit")


# --------------------------------------------------------------------------- served GPUs


def test_served_gpus_resolve_entries_and_refuse_the_others():
    everything = {"GPU-a": (0, "ha"), "GPU-b": (1, "hb")}
    by_index = {0: "GPU-a", 1: "GPU-b"}
    lookup = lambda e: by_index.get(e) if isinstance(e, int) else e  # noqa: E731
    missing = lambda e: f"nothing is {e!r}"  # noqa: E731
    assert select_gpus("all", everything, lookup, missing) == everything
    assert select_gpus([1], everything, lookup, missing) == {"GPU-b": (1, "hb")}
    for wanted, message, pos in (
        ([0, "GPU-x"], "nothing is 'GPU-x'", 1),
        ([0, "GPU-a"], "listed twice", 1),
        ([True], "nothing is True", 0),
        ([[0]], r"nothing is \[0\]", 0),
    ):
        with pytest.raises(ServiceConfigError, match=message) as e:
            select_gpus(wanted, everything, lookup, missing)
        assert e.value.field == ("gpus", pos)
    served = ServedGpus("serve.lib", {"GPU-a": (0, "ha")})
    assert served.handle("GPU-a") == "ha" and str(served) == "0:GPU-a"
    with pytest.raises(Refused, match=r"GPU GPU-b is not served by this daemon \(it serves GPU-a\); .*\[serve.lib\] gpus"):
        served.handle("GPU-b")
    check = all_or_list("indices")
    attribute = type("A", (), {"name": "gpus"})
    check(None, attribute, "all")
    check(None, attribute, [0])
    with pytest.raises(ValueError, match=r'gpus must be "all" or a list of indices, got \[\]'):
        check(None, attribute, [])


# --------------------------------------------------------------------------- simulated drivers


def _bump_in_another_process(path: str, env: str) -> None:
    import os

    os.environ[env] = path
    state = simulated.SharedState(env, unset=lambda: RuntimeError("unset"), missing=lambda: RuntimeError("missing"))
    with state.changing() as s:
        s["count"] += 1


def test_simulated_state_is_shared_by_processes_and_changed_under_a_lock(tmp_path, monkeypatch):
    env = "ZEUS_TEST_FAKE_STATE"
    shared = simulated.SharedState(env, unset=lambda: KeyError("unset"), missing=lambda: FileNotFoundError("missing"))
    with pytest.raises(KeyError, match="unset"):
        shared.read()
    monkeypatch.setenv(env, str(tmp_path / "state.json"))
    with pytest.raises(FileNotFoundError, match="missing"):
        shared.read()
    simulated.write_state(tmp_path / "state.json", {"count": 0})
    first = shared.read()
    assert first == {"count": 0} and shared.read() is first  # parsed once per write
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_bump_in_another_process, args=(str(tmp_path / "state.json"), env)) for _ in range(3)]
    for p in procs:
        p.start()
    with shared.changing() as s:
        s["count"] += 1
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert shared.read() == {"count": 4}  # no change lost; this process saw the others' writes
    with pytest.raises(RuntimeError):
        with shared.changing() as s:
            s["count"] = 99
            raise RuntimeError("half-way")
    assert shared.fresh() == {"count": 4}


def test_privilege_modes(monkeypatch):
    for mode in (True, False, "root"):
        simulated.check_privilege_mode(mode)
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match='privileged must be True, False or "root"'):
            simulated.check_privilege_mode(bad)
    monkeypatch.setattr(simulated, "has_capability", lambda bit: bit == 21)
    assert simulated.may_change(True, 1) and not simulated.may_change(False, 21)
    assert simulated.may_change("root", 21) and not simulated.may_change("root", 1)


# --------------------------------------------------------------------------- groups


def test_deferred_factory_imports_the_device_code_on_first_open(tmp_path, monkeypatch):
    (tmp_path / "zeus_test_deferred_dev.py").write_text("def make(options, context):\n    return ('built', options, context)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    factory = deferred_factory("zeus_test_deferred_dev:make", "A test device.")
    assert "zeus_test_deferred_dev" not in sys.modules and factory.__doc__ == "A test device."
    assert factory("o", "c") == ("built", "o", "c")
    with pytest.raises(ValueError, match="expected"):
        deferred_factory("no_colon", "x")


class Group(GpuGroup):
    def __init__(self, gpus):
        self.gpus = gpus
        self.names = [g.name for g in gpus]

    def close(self):
        pass


def test_gpu_group_limits_are_checked_before_any_is_set():
    a, b = Gpu("gpu0", 100, 300, 300), Gpu("gpu1", 150, 250, 250)
    with Group([a, b]) as group:
        assert group.power_limit_range() == (150, 250)
        assert group.power_limit() == 275.0 and group.power_limits() == {"gpu0": 300, "gpu1": 250}
        with pytest.raises(ValueError, match=r"power limits outside their GPU's range: gpu1 280 W \(range 150 to 250 W\)$"):
            group.set_power_limit(280)
        with pytest.raises(ValueError, match="no GPU named gpu7"):
            group.set_power_limits({"gpu7": 200})
        assert a.sets == [] and b.sets == []  # nothing changed
        group.set_power_limit(200)
        assert group.power_limit() == 200 and a.sets == [200] and b.sets == [200]
        assert group.read_power() == {"gpu0": 123.0} and group.read_temperatures() == {"gpu0": 55.0}  # gpu1 reports neither
        assert group.device_models == {"gpu0": "Model X", "gpu1": "Model X"}
        assert group.identity() == {"gpu_models": ["Model X", "Model X"]}
    with pytest.raises(DeviceError, match=r"power limit ranges do not overlap"):
        Group([Gpu("gpu0", 100, 150), Gpu("gpu1", 200, 250)]).power_limit_range()


def test_a_simulated_driver_s_command_line_and_what_it_does_not_simulate(capsys):
    p = simulated.command_line("some.fake", "Foo driver", "ZEUS_FAKE_FOO", "power caps", "CAP_X")
    args, mode = simulated.parse_command_line(p, ["/tmp/x.json", "--gpus", "3", "--root-only"])
    assert (args.path, args.gpus, mode) == ("/tmp/x.json", 3, "root")
    assert simulated.parse_command_line(p, ["x", "--privileged"])[1] is True
    assert simulated.parse_command_line(p, ["x"])[1] is False
    with pytest.raises(SystemExit):
        simulated.parse_command_line(p, ["x", "--gpus", "0"])
    assert "--gpus must be at least 1, got 0" in capsys.readouterr().err
    getattr_ = simulated.unsimulated("some.fake", "foo")
    with pytest.raises(AttributeError, match="the simulated driver some.fake does not simulate fooBar; add it there"):
        getattr_("fooBar")
    with pytest.raises(AttributeError, match="^other$"):
        getattr_("other")
