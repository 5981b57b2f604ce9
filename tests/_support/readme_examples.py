"""Run a plugin README's "Try it" shell block as written, in a fresh folder (for the README tests)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def try_it_block(readme: Path) -> str:
    """The first ``bash`` block of the README's section whose title starts with "Try it"."""
    text = readme.read_text()
    section = re.search(r"\n## Try it[^\n]*\n(.*?)(?=\n## |\Z)", text, re.S)
    assert section, f"{readme} has no 'Try it' section"
    block = re.search(r"```bash\n(.*?)```", section.group(1), re.S)
    assert block, f"{readme}'s 'Try it' section has no bash block"
    return block.group(1)


def run_try_it(readme: Path, workdir: Path) -> tuple[subprocess.CompletedProcess, str]:
    """Run the block with every ``/tmp/`` path moved into ``workdir``, ``zeus`` from this Python's
    environment, and this test's state folder; returns the process and the block as run."""
    script = try_it_block(readme).replace("/tmp/", f"{workdir}/")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEUS_FAKE", "CUDA_", "HIP_", "ROCR_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        COLUMNS="200",
        ZEUS_DISABLED_PLUGINS="torch,perseus,hetero,trace,mab",
    )
    p = subprocess.run(["bash", "-c", "set -e\n" + script], cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    return p, script
