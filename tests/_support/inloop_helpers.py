"""Helpers for the tests of zeus inside the user's own loop (ZeusMonitor, PowerLimitOptimizer,
BatchSizeOptimizer, trainer callbacks): the simulated NVIDIA driver, and tiny training steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from zeus_plugins_nvml import fake_pynvml

#: jit options that profile every limit (400 W down to 100 W, 13 of them) in 117 steps
QUICK_JIT = {"warmup_iters": 1, "measure_iters": 8}


def fake_gpus(path: Path, monkeypatch: Any = None, gpus: int = 1, privileged: bool | str = True) -> Path:
    """A simulated driver with ``gpus`` A100s at ``path``, used by this process (and by children,
    through ``ZEUS_FAKE_NVML``)."""
    if monkeypatch is not None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    fake_pynvml.create(path, gpus, privileged=privileged)
    fake_pynvml.install(path, monkeypatch)
    return path


def limits(path: Path) -> list[float]:
    """Every simulated GPU's power limit now (W)."""
    return [g["limit_w"] for g in fake_pynvml.read_state(path)["gpus"]]


def spin(seconds: float) -> None:
    """Busy work of a fixed length (a training step)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run_epochs(plo: Any, epochs: int, steps: int, step_s: float = 0.0005, seen: list | None = None) -> None:
    """The user's loop: ``epochs`` epochs of ``steps`` steps, with the optimizer's four calls."""
    for _ in range(epochs):
        plo.on_epoch_begin()
        for _ in range(steps):
            plo.on_step_begin()
            if seen is not None:
                seen.append(plo.power_limit)
            spin(step_s)
            plo.on_step_end()
        plo.on_epoch_end()


def train_to_target(batch_size: int, zeus: Any) -> None:
    """A ``torch`` workload entry: 60 quick steps per epoch, the target reached in the first epoch."""
    for _ in zeus.epochs():
        for _ in zeus.iterate(range(60)):
            spin(0.0003)
        zeus.report_metric(1.0)


def env_with_fake(path: Path) -> dict[str, str]:
    """The environment of a child process that uses the simulated driver at ``path``."""
    env = dict(os.environ)
    env["ZEUS_FAKE_NVML"] = str(path)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


class ThreadGroup:
    """``n`` ranks as threads of one process: a :class:`zeus_core.backends.ProcessGroup` for tests of what
    the ranks say to each other, without launching processes. The k-th collective of every rank
    meets in the k-th slot; a rank that left (:meth:`leave`) makes the others' next collective
    that it does not join raise ``threading.BrokenBarrierError``, as a process that exits breaks a
    real group's."""

    class _Shared:
        def __init__(self, n: int) -> None:
            import threading

            self.cond = threading.Condition()
            self.n = n
            self.slots: dict[int, list[Any]] = {}  # collective number -> what each rank brought
            self.arrived: dict[int, int] = {}
            self.left: set[int] = set()  # ranks that left: they join no collective any more

    def __init__(self, shared: ThreadGroup._Shared, rank: int, n: int) -> None:
        self._s = shared
        self.rank = rank
        self.world_size = n
        self.local_rank = rank
        self._count = 0

    @classmethod
    def make(cls, n: int) -> list[ThreadGroup]:
        shared = cls._Shared(n)
        return [cls(shared, r, n) for r in range(n)]

    def _meet(self, obj: Any) -> list[Any]:
        import copy
        import threading

        s, k = self._s, self._count
        self._count += 1
        with s.cond:
            if self.rank in s.left:
                raise threading.BrokenBarrierError(f"rank {self.rank} left the group")
            s.slots.setdefault(k, [None] * s.n)[self.rank] = obj
            s.arrived[k] = s.arrived.get(k, 0) + 1
            s.cond.notify_all()
            if not s.cond.wait_for(lambda: s.arrived[k] == s.n or s.left, timeout=30) or s.arrived[k] < s.n:
                raise threading.BrokenBarrierError(f"rank {self.rank}: a rank left before collective {k}")
            return copy.deepcopy(s.slots[k])

    def leave(self) -> None:
        with self._s.cond:
            self._s.left.add(self.rank)
            self._s.cond.notify_all()

    def broadcast(self, obj: Any) -> Any:
        return self._meet(obj if self.rank == 0 else None)[0]

    def gather(self, obj: Any) -> list[Any] | None:
        got = self._meet(obj)
        return got if self.rank == 0 else None


def run_ranks(groups: list[ThreadGroup], fn: Any) -> list[Any]:
    """``fn(group)`` on every rank, each in its own thread; the results (or exceptions) by rank.
    A rank that raises leaves the group."""
    import threading

    out: list[Any] = [None] * len(groups)

    def one(g: ThreadGroup) -> None:
        try:
            out[g.rank] = fn(g)
        except BaseException as e:  # noqa: BLE001 - returned to the test
            out[g.rank] = e
            g.leave()

    threads = [threading.Thread(target=one, args=(g,)) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def gpu_limit(index: int) -> float:
    """Simulated GPU ``index``'s power limit now (physical index; the driver of ``ZEUS_FAKE_NVML``)."""
    return fake_pynvml.read_state(os.environ[fake_pynvml.ENV])["gpus"][index]["limit_w"]


def train_recording(batch_size: int, zeus: Any) -> None:
    """A ``torch`` workload entry for launched ranks: 60 steps an epoch, the target reached in the
    first; every step's (global batch size, this rank's GPU limit) and this rank's energy are appended
    to ``args["out"]`` (one JSON line per try)."""
    import json

    gpu = int(zeus.args.get("gpu", zeus.rank))
    steps = []
    for _ in zeus.epochs():
        for _ in zeus.iterate(range(60)):
            steps.append([zeus.batch_size, gpu_limit(gpu)])
            spin(0.0003)
        zeus.report_metric(1.0)
    energy = sum(m.total_system_energy for m in zeus.local_measurements)
    with open(zeus.args["out"].format(rank=zeus.rank), "a") as f:
        f.write(json.dumps({"recurrence": zeus.recurrence, "try": zeus.try_index, "steps": steps, "energy_j": energy}) + "\n")


def launcher_env(driver: Path, *paths: Path, **extra: str) -> dict[str, str]:
    """The environment of a launcher (torchrun) whose ranks use the simulated driver at ``driver``:
    these helpers and ``paths`` importable, one thread per rank, short rendezvous timeouts, and
    none of this process's own rank variables."""
    env = env_with_fake(driver)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent), *map(str, paths), env.get("PYTHONPATH", "")])
    env.update(OMP_NUM_THREADS="1", ZEUS_DIST_TIMEOUT_S="60", **extra)
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    return env


def torchrun(*args: str) -> list[str]:
    """The command line of ``torchrun ARGS`` with this Python."""
    return [sys.executable, "-m", "torch.distributed.run", *args]


def torchrun_trainer_ranks(tmp_path: Path, monkeypatch: Any, worker: Path, prefix: str, recurrences: int = 2):
    """``torchrun --standalone --nproc-per-node=2 worker tmp_path recurrences`` on two simulated GPUs.

    The worker writes each rank's tries to ``tmp_path/{prefix}-{rank}.json``. Returns (exit
    status, the end of its output, the driver's path, each rank's tries or None).
    """
    driver = fake_gpus(tmp_path / "nvml.json", monkeypatch, gpus=2)
    p = subprocess.run(
        torchrun("--standalone", "--nproc-per-node=2", str(worker), str(tmp_path), str(recurrences)),
        env=launcher_env(driver),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    files = [tmp_path / f"{prefix}-{r}.json" for r in (0, 1)]
    ranks = [json.loads(f.read_text()) if f.exists() else None for f in files]
    return p.returncode, p.stdout[-3000:] + p.stderr[-6000:], driver, ranks


def assert_one_trainer_job_across_ranks(code: int, output: str, driver: Path, ranks: list, store_path: Path) -> None:
    """Two ranks of one trainer job: one batch size and one limit per step on both, the same combined
    epochs and reported try on both, each rank on its own GPU, every try in the store once."""
    from zeus_core.engine.registry import get_registry
    from zeus_core.engine.stores.locations import open_store

    assert code == 0, output
    assert limits(driver) == [400.0, 400.0]  # every GPU put back
    r0, r1 = ranks
    assert r0 and r1 and len(r0) == len(r1)
    for a, b in zip(r0, r1):
        assert (a["gpu"], b["gpu"], a["world"], b["world"]) == ([0], [1], 2, 2)  # DDP, each rank on its own GPU
        assert a["limits"] and a["batch_size"] == b["batch_size"] and a["limits"] == b["limits"]  # rank 0 decides
        assert a["epochs"] == b["epochs"] and a["record"] == b["record"] and a["record"] is not None
    assert len(set(r0[0]["limits"])) > 3  # the first try profiled several limits, on both GPUs at once
    store = open_store(store_path, get_registry())
    try:
        tries = store.tries()
    finally:
        store.close()
    # exactly the tries the ranks reported, once (rank 0 writes), with the ranks' combined measurement
    assert [[t.recurrence, t.batch_size, t.energy_j, t.time_s, t.reached] for t in tries] == [r["record"] for r in r0]
