"""Issue 33, item 2: `zeus traces synth` and `zeus traces alibaba-synth` on a full or read-only disk
(real tmpfs mounts) name the file they could not write and why, exit 1, no traceback; no file is
left half-written and no temporary file is left behind."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from filesystems import read_only, small_fs  # noqa: E402

from zeus_plugins_trace.commands import traces_group  # noqa: E402


def invoke(*args: str):
    return CliRunner().invoke(traces_group, list(args))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_synth_into_a_disk_that_fills_up_names_the_file(tmp_path):
    whole = _files(tmp_path) if invoke("synth", "--out", str(tmp_path)).exit_code == 0 else {}
    assert len(whole) == 6
    with small_fs("64k") as root:
        r = invoke("synth", "--out", str(root))
        assert r.exit_code == 1, r.output
        assert "Traceback" not in r.output and not isinstance(r.exception, OSError)
        found = re.search(
            rf"Error: {re.escape(str(root))}/(\S+): cannot write it \(No space left on device\); "
            r"nothing was written to it: the disk is full",
            r.output,
        )
        assert found, r.output
        left = _files(root)
        assert found.group(1) in whole and found.group(1) not in left
        assert left, "the disk held the first files"
        for name, data in left.items():  # no temporary file; what is there is whole
            assert not name.startswith("."), name
            assert data == whole[name], name


def test_synth_into_a_read_only_folder_names_it():
    with small_fs("64k") as root, read_only(root):
        r = invoke("synth", "--out", str(root))
        assert r.exit_code == 1, r.output
        assert f"Error: {root}/summary_train.csv: cannot write it (Read-only file system); nothing was written to it" in r.output
        assert "Traceback" not in r.output and list(root.iterdir()) == []


def test_alibaba_synth_on_a_full_disk_writes_nothing():
    with small_fs("128k") as root:
        out = root / "groups.csv"
        r = invoke("alibaba-synth", "--out", str(out))
        assert r.exit_code == 1, r.output
        assert (
            f"Error: --out {out}: cannot write it (No space left on device); nothing was written to it: the disk is full"
        ) in r.output.replace("\n", " ")
        assert "Traceback" not in r.output and not isinstance(r.exception, OSError)
        assert list(root.iterdir()) == []  # no half file, no temporary one


def test_alibaba_synth_on_a_read_only_disk_writes_nothing():
    with small_fs("64k") as root, read_only(root):
        out = root / "groups.csv"
        r = invoke("alibaba-synth", "--out", str(out))
        assert r.exit_code == 1, r.output
        assert f"--out {out}: cannot write it (Read-only file system)" in r.output.replace("\n", " ")
        assert "Traceback" not in r.output and list(root.iterdir()) == []
