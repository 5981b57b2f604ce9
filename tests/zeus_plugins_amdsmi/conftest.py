"""The simulated AMD driver, swapped in for ``amdsmi`` for every test here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from zeus_plugins_amdsmi import fake_amdsmi


@pytest.fixture
def fake_amd(tmp_path, monkeypatch):
    """``make(gpus, privileged=False)`` writes a driver state and installs the fake as ``amdsmi``."""
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)

    def make(gpus=1, privileged=False):
        path = fake_amdsmi.create(tmp_path / "amd-driver.json", gpus, privileged=privileged)
        return fake_amdsmi.install(path, monkeypatch)

    return make


@pytest.fixture
def killed_then_restarted():
    """``run(change, check)``: a process opens every GPU, calls ``change`` on the group (``"lock_clocks(1300)"``)
    and is SIGKILLed; ``check()`` looks at what it left; then ``zeus`` starts once (its start puts back
    what a dead process left changed): its stderr is returned."""

    def run(change: str, check) -> str:
        script = textwrap.dedent(f"""
            import sys, time
            from zeus_plugins_amdsmi import fake_amdsmi
            fake_amdsmi.install(sys.argv[1])
            from zeus_plugins_amdsmi.device import AmdGpus
            from zeus_plugins_amdsmi.options import AmdsmiOptions
            AmdGpus(AmdsmiOptions(counter_check_s=0.02)).{change}
            print("changed", flush=True)
            time.sleep(60)
        """)
        child = subprocess.Popen([sys.executable, "-c", script, os.environ[fake_amdsmi.ENV]], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "changed"
        finally:
            child.kill()
            child.wait()
        check()
        env = dict(os.environ, ZEUS_DISABLED_PLUGINS="torch,perseus,hetero,mab,trace")
        r = subprocess.run([sys.executable, "-m", "zeus_core", "plugins", "--json"], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        return r.stderr

    return run
