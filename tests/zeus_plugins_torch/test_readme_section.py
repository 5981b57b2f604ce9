"""Every example of the README's "Add zeus to your own training script" runs as written.

The section's Python blocks are files (their first line names them); its shell blocks are run in
order, in one shell, in an empty folder, on the simulated NVIDIA driver the section's first block
creates (at a path of this test's instead of ``/tmp/zeus-fake-nvml.json``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from zeus_core.engine.registry import get_registry
from zeus_core.engine.stores.locations import open_store

README = Path(__file__).resolve().parents[2] / "README.md"
TITLE = "## Add zeus to your own training script"


def section() -> str:
    text = README.read_text()
    assert TITLE in text, f"README.md has no section {TITLE!r}"
    return text.split(TITLE, 1)[1].split("\n## ", 1)[0]


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"```(python|bash)\n(.*?)```", section(), re.S)


def test_the_sections_files_and_commands_are_what_the_test_runs():
    got = blocks()
    files = [body.splitlines()[0] for lang, body in got if lang == "python"]
    assert all(re.fullmatch(r"# [\w-]+\.py", f) for f in files), files
    commands = "\n".join(body for lang, body in got if lang == "bash")
    for f in files:  # every file the section shows is run by one of its commands
        assert f"{f[2:]}" in commands, f"{f[2:]} is never run"


def test_every_example_runs_as_written(tmp_path):
    driver = tmp_path / "zeus-fake-nvml.json"
    shell = ["set -e"]
    for lang, body in blocks():
        if lang == "python":
            name = body.splitlines()[0][2:].strip()
            (tmp_path / name).write_text(body)
        else:
            shell.append(body.replace("/tmp/zeus-fake-nvml.json", str(driver)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "ZEUS_FAKE", "RANK", "WORLD_SIZE", "LOCAL_", "MASTER_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["OMP_NUM_THREADS"] = "1"
    p = subprocess.run(["bash", "-c", "\n".join(shell)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout
    assert p.returncode == 0, out[-3000:] + p.stderr[-6000:]
    assert re.search(r"0\.5\d s, [\d.]+ J on GPU 0", out), out
    assert re.search(r"holding (\d+) W; last epoch: [\d.]+ J", out), out
    assert re.search(r"both GPUs at (\d+) W; last epoch, both ranks: [\d.]+ J", out), out
    assert re.search(r"recurrence 2, try \d+: batch size \d+", out), out
    assert re.search(r"try 1 at batch size \d+: cost [\d.]+, (not )?reached; epochs: \[\{'zeus/energy_j'", out), out
    assert re.search(r"stopped after epoch \d+: [\d.]+ J in the last, try (not )?reached", out), out
    store = open_store(tmp_path / ".zeus" / "mlp-bs.sqlite", get_registry())
    try:
        assert sorted({t.recurrence for t in store.tries()}) == [1, 2]
    finally:
        store.close()
    from zeus_plugins_nvml import fake_pynvml

    assert [g["limit_w"] for g in fake_pynvml.read_state(driver)["gpus"]] == [400.0, 400.0]
