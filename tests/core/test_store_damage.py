"""Damaged stores: refused (exit 2, naming the file, the file unchanged), never written into, never a
traceback; `zeus store check` and `zeus run` give the same verdict on every one.

The damage is what a tester (or a bad disk, or a hand with sqlite3) does: random bytes inside
row data, a dropped table or column, JSON that no zeus wrote, counters that make no sense, a
try stored twice. The store comes from a real run of the toy job, in process.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from zeus_test_helpers import TOY_JOB, run_cli, toy_registry, write_job

from zeus_core.engine.stores.sqlite import Store

#: The toy job with a batch-size policy that keeps state (it counts what it chose and observed).
JOB = TOY_JOB.replace('plugin = "fixed"\ndefault = 32', 'plugin = "counting"')


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def reg(toy_plugin):
    return toy_registry(toy_plugin)


@pytest.fixture(scope="module")
def learned(reg, tmp_path_factory) -> Path:
    """A store of the toy job after 6 recurrences (WAL checkpointed: the file is the whole store)."""
    folder = tmp_path_factory.mktemp("learned")
    job = write_job(folder / "job.toml", JOB)
    r = run_cli(reg, "run", str(job), "--set", "job.recurrences=6", "--set", f'job.store="{folder / "s.sqlite"}"')
    assert r.exit_code == 0, r.output
    return folder / "s.sqlite"


def _copy(learned: Path, tmp_path: Path, name: str = "s.sqlite") -> Path:
    path = tmp_path / name
    shutil.copy(learned, path)
    return path


def _sql(path: Path, *statements: str, params: tuple = ()) -> None:
    c = sqlite3.connect(path)
    for s in statements:
        c.execute(s, params if "?" in s else ())
    c.commit()
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def verdicts(reg, job: Path, path: Path) -> tuple[int, str, int, str]:
    """(exit, output) of `zeus run` and of `zeus store check` on the store at ``path``."""
    run = run_cli(reg, "run", str(job), "--set", f'job.store="{path}"')
    check = run_cli(reg, "store", "check", str(path))
    return run.exit_code, " ".join(run.output.split()), check.exit_code, " ".join(check.output.split())


DAMAGE = {
    "a dropped tries table": (["DROP TABLE tries"], "its schema's table tries is missing"),
    "a dropped column": (["ALTER TABLE tries DROP COLUMN steady_cost"], "table tries lacks the column steady_cost"),
    "bad JSON in a policy state": (
        ["UPDATE state SET value = '{\"observed\": 3' WHERE key = 'policy:batch_size'"],
        "state 'policy:batch_size' is not JSON zeus wrote",
    ),
    "NaN next_recurrence": (
        ["UPDATE state SET value = '{\"next_recurrence\": NaN, \"min_cost\": null}' WHERE key = 'runner'"],
        "state 'runner' is not JSON zeus wrote (NaN is not JSON zeus writes)",
    ),
    "negative next_recurrence": (
        ["UPDATE state SET value = '{\"next_recurrence\": -7, \"min_cost\": null}' WHERE key = 'runner'"],
        "next_recurrence is -7, not a whole number >= 1",
    ),
    "a fractional next_recurrence": (
        ["UPDATE state SET value = '{\"next_recurrence\": 2.5}' WHERE key = 'runner'"],
        "next_recurrence is 2.5, not a whole number >= 1",
    ),
    "a try beyond next_recurrence": (
        ["UPDATE state SET value = '{\"next_recurrence\": 3, \"min_cost\": 1.0}' WHERE key = 'runner'"],
        "recurrence 3 has a try but was never begun (next_recurrence is 3)",
    ),
    "a try stored twice": (
        [
            "INSERT INTO tries (recurrence, try_index, batch_size, power_limit, epochs, time_s, energy_j, cost,"
            " reached, stopped, extra, created) SELECT recurrence, try_index, batch_size, power_limit, epochs,"
            " time_s, energy_j, cost, 0, 'early-stop', extra, created FROM tries WHERE recurrence = 2"
        ],
        "recurrence 2, try 1 is stored twice",
    ),
    "a negative energy": (["UPDATE tries SET energy_j = -1 WHERE recurrence = 4"], "has energy_j that no zeus-core wrote"),
    "text where a number belongs": (["UPDATE tries SET cost = 'x' WHERE recurrence = 1"], "has cost that no zeus-core wrote"),
    "an identity that is not an object": (["UPDATE meta SET value = '[1]' WHERE key = 'identity'"], "the identity is not a JSON object"),
    "an abandoned record of a recurrence never begun": (
        ['INSERT INTO state (key, value) VALUES (\'runner:abandoned\', \'{"99": {"reason": "x", "at": 1.0}}\')'],
        "state 'runner:abandoned' names recurrence 99, which was never begun",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_each_kind_of_damage_is_exit_2_naming_the_file_and_store_check_finds_it(reg, learned, tmp_path, case):
    statements, words = DAMAGE[case]
    path = _copy(learned, tmp_path)
    _sql(path, *statements)
    before = sha(path)
    job = write_job(tmp_path / "job.toml", JOB)
    run_code, run_out, check_code, check_out = verdicts(reg, job, path)
    assert run_code == 2 and f"{path}: is damaged (" in run_out and words in run_out, run_out
    assert check_code == 2 and f"{path}: is damaged (" in check_out and words in check_out, check_out
    assert "The file was not changed" in run_out and sha(path) == before
    assert not Path(f"{path}-wal").exists()


def _row_data_offsets(path: Path) -> list[int]:
    """Byte offsets of the cell content (row data) of the leaf pages of the job's tables."""
    c = sqlite3.connect(path)
    page = c.execute("PRAGMA page_size").fetchone()[0]
    roots = [r[0] for r in c.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'state', 'tries')")]
    c.close()
    data = Path(path).read_bytes()
    offsets = []
    for root in roots:
        start = (root - 1) * page
        header = start + (100 if root == 1 else 0)
        if data[header] != 0x0D:  # not a table leaf (an interior page): its rows are on other pages
            continue
        content = int.from_bytes(data[header + 5 : header + 7], "big") or 65536
        offsets += range(start + content, start + page)
    return offsets


def test_random_bytes_in_row_data_never_make_a_traceback_or_a_write_into_a_damaged_file(reg, learned, tmp_path):
    """30 copies, 8 random bytes each inside row data (seeded): run and check agree on every one; a refused
    store is unchanged; an accepted one is a store whose damage left only values zeus could have written."""
    job = write_job(tmp_path / "job.toml", JOB)
    offsets = _row_data_offsets(learned)
    assert len(offsets) > 500
    rnd = random.Random(27)
    refused = 0
    for i in range(30):
        path = _copy(learned, tmp_path, f"d{i}.sqlite")
        data = bytearray(path.read_bytes())
        for off in rnd.sample(offsets, 8):
            data[off] = rnd.randrange(256)
        path.write_bytes(bytes(data))
        before = sha(path)
        run_code, run_out, check_code, check_out = verdicts(reg, job, path)
        if check_code == 2:
            refused += 1
            assert run_code == 2 and f"{path}: is damaged (" in run_out and f"{path}: is damaged (" in check_out, (run_out, check_out)
            assert sha(path) == before, f"copy {i}: a refused store was written"
        else:
            assert check_code == 0 and run_code == 0, (i, run_out, check_out)
    print(f"{refused} of 30 refused")
    assert refused >= 20  # most random damage is found (what is not decodes to values zeus could have written)


def test_an_empty_file_is_no_store_yet_for_every_command(reg, tmp_path):
    """One rule: an empty file is as if there were none. A run makes it a store; check and export say
    there is none yet (exit 2), as for a missing path; import fills it."""
    job = write_job(tmp_path / "job.toml", JOB)
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    for command in (("store", "check", str(empty)), ("store", "export", str(empty))):
        r = run_cli(reg, *command)
        assert r.exit_code == 2 and "an empty file, which is no store yet" in " ".join(r.output.split()), r.output
    r = run_cli(reg, "run", str(job), "--set", f'job.store="{empty}"')
    assert r.exit_code == 0, r.output
    with Store(empty) as s:
        assert len(s.tries()) == 3
    missing = tmp_path / "missing.sqlite"
    r = run_cli(reg, "store", "check", str(missing))
    assert r.exit_code == 2 and "no such store" in r.output
    assert run_cli(reg, "store", "export", str(empty), "-o", str(tmp_path / "dump.json")).exit_code == 0
    (tmp_path / "new.sqlite").write_bytes(b"")
    r = run_cli(reg, "store", "import", str(tmp_path / "dump.json"), str(tmp_path / "new.sqlite"))
    assert r.exit_code == 0 and run_cli(reg, "store", "check", str(tmp_path / "new.sqlite")).exit_code == 0


def test_a_store_damaged_after_it_was_opened_is_refused_mid_run_not_a_traceback(reg, learned, tmp_path):
    """Another process breaks the JSON of the runner's state while this one holds the store open."""
    from zeus_core.backends import StoreError

    path = _copy(learned, tmp_path)
    with Store(path) as s:
        assert s.get("runner")["next_recurrence"] == 7
        _sql(path, "UPDATE state SET value = '{' WHERE key = 'runner'")
        with pytest.raises(StoreError, match=r"is damaged \(.*Move it aside"):
            s.get("runner")
        with pytest.raises(StoreError, match=r"is damaged"), s.transaction() as tx:
            tx.get("runner")
    with Store(path, verify=False) as s, s.transaction() as tx:  # a value the caller gives stays the caller's error
        with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
            tx.set("x", float("nan"))


def test_state_its_policy_cannot_read_is_exit_2_naming_the_store_and_the_key(reg, tmp_path):
    job = write_job(tmp_path / "job.toml", JOB)
    path = tmp_path / "c.sqlite"
    assert run_cli(reg, "run", str(job), "--set", f'job.store="{path}"').exit_code == 0
    _sql(path, "UPDATE state SET value = ? WHERE key = 'policy:batch_size'", params=(json.dumps({"observed": 1}),))
    before = sha(path)
    r = run_cli(reg, "run", str(job), "--set", f'job.store="{path}"')
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and f"{path}: its state 'policy:batch_size' is not one the job's policy reads (KeyError" in out, out
    assert "zeus run --fresh" in out and sha(path) == before
