"""Independent work on another CPU, in a worker process that is safe to start from any program.

The planner has work that needs nothing from what runs beside it (the
real-time plans, a share of the HiGHS checks and slack reclamation, the plan files):
where this process may use more than one CPU it goes to one worker process,
otherwise it runs here when its result is asked for; the results are the same.

The worker is a fresh interpreter (``python -m zeus_plugins_perseus.background``)
fed pickled calls over a pipe, not a ``multiprocessing`` process: a fork would
inherit the caller's threads' locks (rich's progress display, a server's
thread pool), and ``spawn`` / ``forkserver`` re-run the caller's main script,
which breaks any script that plans at top level. It gets the parent's
``sys.path`` first, runs its ``at_start`` call (the imports its calls will need,
while the caller prepares them), then the calls in order, and ends when its pipe closes
(so also when the parent dies). A worker that dies (the OOM killer) ends the
wait with an error naming what to do.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

_HEADER = struct.Struct("<Q")


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _send(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive_bytes(stream: IO[bytes]) -> bytes:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return data


def _receive(stream: IO[bytes]) -> Any:
    return pickle.loads(_receive_bytes(stream))


@dataclasses.dataclass(frozen=True)
class Imports:
    """A call that imports ``modules``, pickled by their names: a worker's ``at_start`` chosen before the caller
    imports them itself."""

    modules: tuple[str, ...]

    def __call__(self) -> None:
        for name in self.modules:
            importlib.import_module(name)


class WorkerDied(RuntimeError):
    """The worker process ended without an answer."""


class Result:
    """What :meth:`Background.submit` returns: ``result()`` waits for the call (or makes it, run here)."""

    def __init__(self, owner: Background | None, call: tuple[Callable, tuple]) -> None:
        self._owner, self._call = owner, call
        self._done = False
        self._value: Any = None

    def result(self) -> Any:
        if not self._done:
            if self._owner is None:
                fn, args = self._call
                self._value = fn(*args)
            else:
                self._value = self._owner._collect(self)
            self._done = True
        if isinstance(self._value, _Raised):
            raise self._value.error
        return self._value


class _Raised:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class Background:
    """``with Background(workers) as bg: r = bg.submit(fn, *args)``; ``r.result()`` inside the block.

    ``workers``: None uses a worker process when there is a second CPU; 1 (or
    one CPU) runs every call here, when its result is asked for.
    """

    def __init__(
        self,
        workers: int | None = None,
        cpu_s: float | None = None,
        memory_bytes: int | None = None,
        at_start: Callable[[], Any] | None = None,
    ) -> None:
        self.parallel = (workers is None and usable_cpus() > 1) or (workers is not None and workers > 1)
        #: the worker's budget (RLIMIT_CPU, RLIMIT_AS), set by the worker on itself before any call
        self.limits = (None if cpu_s is None else int(max(1, cpu_s)), memory_bytes)
        #: called once by the worker as soon as it starts, before its first call (the imports the calls will need,
        #: made while the caller prepares them); calls sent meanwhile are read and wait
        self.at_start = at_start
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: list[Result] = []

    def __enter__(self) -> Background:
        return self

    def _worker(self) -> tuple[subprocess.Popen[bytes], IO[bytes], IO[bytes]]:
        """The started worker and the pipes to it (its stdin) and from it (its stdout)."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None, "the worker is started, with both pipes"
        return proc, proc.stdin, proc.stdout

    def start(self) -> None:
        """Start the worker now (where there is one), before the first call: its start-up overlaps the caller's."""
        if not self.parallel or self._proc is not None:
            return
        env = None
        if self.limits[1] is not None:
            # one BLAS thread and one malloc arena: no per-thread buffers (an arena reserves 64 MiB) eating the
            # address space; OpenBLAS retries a failed buffer allocation without end, so a budget spent on them
            # would end as CPU time rather than a MemoryError
            env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MALLOC_ARENA_MAX="1")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "zeus_plugins_perseus.background"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        stdin = self._worker()[1]
        _send(stdin, (list(sys.path), self.limits))
        _send(stdin, self.at_start)  # unpickled there once sys.path is the one sent

    def submit(self, fn: Callable, *args) -> Result:
        if not self.parallel:
            return Result(None, (fn, args))
        self.start()
        r = Result(self, (fn, args))
        _send(self._worker()[1], (fn, args))
        self._pending.append(r)
        return r

    def _collect(self, wanted: Result) -> Any:
        """Read answers in submission order up to ``wanted``'s."""
        while self._pending:
            r = self._pending.pop(0)
            proc, _, stdout = self._worker()
            try:
                status, value = _receive(stdout)
            except EOFError:
                proc.wait()
                raise WorkerDied(
                    f"a worker process of the planner ended without an answer (exit status "
                    f"{proc.returncode}: killed, or out of memory?); nothing was written: run "
                    "again"
                ) from None
            answer = value if status == "ok" else _Raised(value)
            if r is wanted:
                return answer
            r._value, r._done = answer, True
        raise RuntimeError("no such call is pending")  # pragma: no cover

    @property
    def exit_status(self) -> int | None:
        """The worker's exit status once it ended (negative: the signal that ended it)."""
        return None if self._proc is None else self._proc.poll()

    def kill(self) -> None:
        """End the worker now (its memory goes back to the system); a call waiting on it ends with
        :class:`WorkerDied`."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            proc, stdin, stdout = self._worker()
            stdin.close()
            if exc[0] is not None:
                proc.kill()
            proc.wait()
            stdout.close()


def planner_worker() -> Background:
    """The ``perseus`` policy's worker: it imports the planner as soon as it starts (while the caller does too)."""
    return Background(at_start=Imports(("zeus_plugins_perseus.planner",)))


def _serve() -> None:
    """The worker: calls from stdin, answers on stdout, in order, until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which ends the worker
    stdin = sys.stdin.buffer
    # answers go to a copy of the pipe; whatever a call (or a C library) prints goes to stderr
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    path, (cpu_s, memory_bytes) = _receive(stdin)
    sys.path[:] = path
    # kept as bytes until the calls are being read: unpickling it may import its module, and meanwhile the caller
    # would block writing its first call into a full pipe
    start_call = _receive_bytes(stdin)
    if cpu_s is not None or memory_bytes is not None:
        import resource

        if cpu_s is not None:  # SIGXCPU ends the worker at the soft limit
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
        if memory_bytes is not None:  # allocations past it fail (MemoryError)
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # calls are read as they come, so that the caller never blocks writing one while this process
    # writes an answer it has not read yet
    calls: queue.Queue[bytes | None] = queue.Queue()

    def read_calls() -> None:
        while True:
            try:
                calls.put(_receive_bytes(stdin))
            except (EOFError, OSError):
                calls.put(None)
                return

    # answers are written by a thread of their own, so that the next call runs while the caller has not read
    # the last answer yet (a pipe holds 64 KiB: a plan set is more)
    answers: queue.Queue[bytes | None] = queue.Queue()

    def write_answers() -> None:
        while (data := answers.get()) is not None:
            try:
                stdout.write(_HEADER.pack(len(data)))
                stdout.write(data)
                stdout.flush()
            except OSError:  # the caller is gone (it died, or ended this worker): nobody is left to answer
                os._exit(0)

    threading.Thread(target=read_calls, name="zeus-perseus-worker-calls", daemon=True).start()
    writer = threading.Thread(target=write_answers, name="zeus-perseus-worker-answers", daemon=True)
    writer.start()
    at_start = pickle.loads(start_call)
    if at_start is not None:
        _run(at_start)  # its answer is nobody's
    while True:
        data = calls.get()
        if data is None:  # the caller is done: nothing here needs tearing down
            answers.put(None)
            writer.join()
            stdout.flush()
            os._exit(0)
        try:
            call = pickle.loads(data)
        except Exception as e:  # noqa: BLE001 - e.g. its module fails to import here: the caller raises it
            answer: tuple[str, Any] = ("error", RuntimeError(f"the worker could not load its call: {e!r}"))
        else:
            answer = _run(*call)
        try:
            answers.put(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception as e:  # noqa: BLE001 - an answer that cannot be pickled is the caller's error
            answers.put(pickle.dumps(("error", RuntimeError(f"the worker's answer cannot be sent: {e!r}"))))


def _run(fn: Callable, args: tuple = ()) -> tuple[str, Any]:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - the caller raises it
        return ("error", e)


if __name__ == "__main__":
    _serve()
