"""Issue 33, item 2 (outputs): a full disk, a read-only one or an I/O error while writing an output is
named as what it is, per file, exit 1, no traceback, and nothing half-written (real tmpfs mounts:
tests/_support/filesystems.py).

* :func:`zeus_core.files.write_atomic` / :func:`~zeus_core.files.atomic_path`: the ``OSError`` names
  the file meant (not the temporary one, which is gone), and :func:`~zeus_core.files.cannot_write`
  says it;
* ``zeus monitor --csv``: a CSV that cannot be begun stops the command before it monitors; one whose
  disk fills up mid-run stops the monitor with its summary; either way exit 1 and no file.
"""

from __future__ import annotations

import errno
import sys
import time
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from filesystems import fill, read_only, small_fs  # noqa: E402

from zeus_core import hookimpl  # noqa: E402
from zeus_core.cli.main import cli  # noqa: E402
from zeus_core.engine import registry as zreg  # noqa: E402
from zeus_core.files import atomic_path, cannot_write, write_atomic  # noqa: E402


def _left(folder: Path) -> list[str]:
    """What is in ``folder`` but the filler."""
    return sorted(p.name for p in folder.iterdir() if p.name != ".filler")


def test_write_atomic_on_a_full_disk_names_the_file_and_leaves_the_old_one():
    with small_fs("64k") as root:
        target = root / "summary.json"
        target.write_text("old\n")
        fill(root)
        with pytest.raises(OSError) as caught:
            write_atomic(target, "x" * 200_000)
        e = caught.value
        assert e.errno == errno.ENOSPC and e.filename == str(target)  # the file meant, not ".summary.XXXX.json"
        assert target.read_text() == "old\n" and _left(root) == ["summary.json"]  # no temporary file left
        message = cannot_write(e)
        assert message.startswith(f"{target}: cannot write it (No space left on device); nothing was written to it")
        assert "the disk is full" in message
        assert cannot_write(e, "--output out.json").startswith("--output out.json: cannot write it")


def test_atomic_path_on_a_read_only_disk_names_the_file():
    with small_fs("64k") as root, read_only(root):
        with pytest.raises(OSError) as caught, atomic_path(root / "plan.json") as tmp:
            tmp.write_text("{}")
        e = caught.value
        assert e.errno == errno.EROFS and e.filename == str(root / "plan.json")
        assert "(Read-only file system); nothing was written to it: that file system is read-only" in cannot_write(e)
        assert _left(root) == []


# -- zeus monitor --csv --

#: what the wide device does after its Nth reading (set by a test): fill the disk under the CSV
FILL_AFTER: dict[str, object] = {}


class Wide:
    """A real-time device of 40 rails, so that each CSV row is about a kilobyte."""

    clock = staticmethod(time.monotonic)

    def __init__(self) -> None:
        self.names = [f"rail{i}" for i in range(40)]
        self.energy_sources = dict.fromkeys(self.names, "counter")
        self.max_power_w = 300.0
        self.t0 = time.monotonic()
        self.reads = 0
        self.closed = False
        OPENED.append(self)

    def read_energy(self):
        self.reads += 1
        if FILL_AFTER and self.reads == FILL_AFTER["reads"]:
            fill(FILL_AFTER["folder"])  # type: ignore[arg-type]
        t = time.monotonic() - self.t0
        return {n: 10.0 * t for n in self.names}

    def close(self):
        self.closed = True


OPENED: list[Wide] = []
plugin = types.ModuleType("zeus_test_wide_device")


@hookimpl
def zeus_register_devices(register):
    register("wide", lambda o, c: Wide())


plugin.zeus_register_devices = zeus_register_devices


@pytest.fixture
def reg():
    OPENED.clear()
    FILL_AFTER.clear()
    yield zreg.load(extra_plugins=[("widedevice", plugin)], entry_points=False)
    FILL_AFTER.clear()


def monitor(reg, *args):
    return CliRunner().invoke(cli, ["monitor", "-d", "wide", *args], obj={"registry": reg})


def test_monitor_csv_on_a_read_only_disk_stops_before_monitoring(reg):
    with small_fs("64k") as root, read_only(root):
        out = root / "samples.csv"
        r = monitor(reg, "--duration", "5", "--csv", str(out))
        assert r.exit_code == 1, r.output
        assert f"--csv {out}: cannot write it (Read-only file system); nothing was written to it" in r.output
        assert "Traceback" not in r.output and not isinstance(r.exception, OSError)
        assert "summary" not in r.output  # nothing was monitored
        assert _left(root) == [] and OPENED and all(d.closed for d in OPENED)


def test_monitor_csv_on_a_full_disk_stops_before_monitoring(reg):
    with small_fs("64k") as root:
        fill(root)
        out = root / "samples.csv"
        r = monitor(reg, "--duration", "5", "--csv", str(out))
        assert r.exit_code == 1, r.output
        assert f"--csv {out}: cannot write it (No space left on device); nothing was written to it: the disk is full" in r.output
        assert "Traceback" not in r.output and not isinstance(r.exception, OSError)
        assert _left(root) == [] and all(d.closed for d in OPENED)


def test_monitor_csv_whose_disk_fills_mid_run_stops_with_its_summary(reg):
    """The disk fills after the third sample: the monitor stops at the next row that does not fit,
    shows its summary, removes its temporary file and exits 1 (it used to end in a traceback)."""
    with small_fs("256k") as root:
        FILL_AFTER.update(reads=4, folder=root)  # the first reading is the start; then samples
        out = root / "samples.csv"
        start = time.monotonic()
        r = monitor(reg, "--duration", "60", "--interval", "0.05", "--csv", str(out))
        assert time.monotonic() - start < 30, "the monitor went on past the full disk"
        assert r.exit_code == 1, r.output
        assert "zeus monitor: summary over" in r.output
        assert f"--csv {out}: cannot write it (No space left on device); nothing was written to it" in r.output
        assert "monitoring stopped after" in r.output
        assert "Traceback" not in r.output and not isinstance(r.exception, OSError)
        assert _left(root) == [] and all(d.closed for d in OPENED)


def test_monitor_csv_is_put_in_place_whole(reg, tmp_path):
    out = tmp_path / "deep" / "samples.csv"
    r = monitor(reg, "--duration", "0.3", "--interval", "0.1", "--csv", str(out))
    assert r.exit_code == 0, r.output
    lines = out.read_text().splitlines()
    assert lines[0].startswith("time,elapsed_s,rail0_power_w") and len(lines) >= 3
    assert sorted(p.name for p in out.parent.iterdir()) == ["samples.csv"]
