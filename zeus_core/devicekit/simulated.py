"""What simulated drivers share: one state file for every process, and who may change it.

A device plugin is tested (and demonstrated on a machine without the hardware)
against a simulated driver with the vendor library's interface, put where the
plugin imports the library (:func:`install`), so the code under test is the
code that runs on real hardware. Like a real driver, its state is machine-wide:
a JSON file named by an environment variable (:class:`SharedState`), which
every process reads (the device, a background poller, a root ``zeus daemon``
and its unprivileged client, a process started after a SIGKILL). A setting
changed by a process that then dies stays changed for the next one.

Reads are as cheap as a driver call: each process keeps the parsed state and
checks an 8-byte generation counter beside the file (shared memory), which
every write increments. Writes replace the file atomically under an exclusive
lock, so concurrent processes never lose a change.

Who may call a setter is a state's ``privileged`` mode (:func:`may_change`):
``True`` (every process, as if all ran as root), ``False`` (none), or ``"root"``
(as the real driver: only a process holding the capability the driver checks,
which root has and loses when it drops to another user).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import mmap
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from zeus_core.daemon import has_capability

#: the values of a state's ``privileged`` mode
PRIVILEGE_MODES = (True, False, "root")


def check_privilege_mode(value: Any) -> None:
    """A ``ValueError`` unless ``value`` is one of :data:`PRIVILEGE_MODES`."""
    if value not in PRIVILEGE_MODES or not isinstance(value, (bool, str)):
        raise ValueError(f'privileged must be True, False or "root", got {value!r}')


def may_change(mode: Any, capability: int) -> bool:
    """Whether this process may call a setter under privilege ``mode``; ``capability`` is the bit
    the real driver checks (``"root"`` mode)."""
    return has_capability(capability) if mode == "root" else bool(mode)


def write_state(path: str | os.PathLike[str], state: dict) -> Path:
    """Replace the state file at ``path`` atomically, then bump its generation counter so that
    every process's parsed copy is read again at its next call."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, p)
    gen_path = Path(f"{p}.gen")
    if not gen_path.exists():
        gen_path.write_bytes(b"\0" * 8)
    with open(gen_path, "r+b") as f:
        gen = int.from_bytes(f.read(8), "little") + 1
        f.seek(0)
        f.write(gen.to_bytes(8, "little"))
    return p


#: How many times this process has read each simulated driver's state (every driver call reads it), by variable.
_reads: dict[str, int] = {}


def reads() -> dict[str, int]:
    """How many times this process has read each simulated driver's state, by variable (``ZEUS_FAKE_NVML``):
    a mark to give :func:`read_since`."""
    return dict(_reads)


def read_since(mark: dict[str, int]) -> list[str]:
    """The simulated drivers called since :func:`reads` gave ``mark`` (their variables): what was measured
    meanwhile was measured on a simulated device, not on real hardware."""
    return sorted(env for env, n in _reads.items() if n > mark.get(env, 0))


class SharedState:
    """The state of one simulated driver, at the path ``$<env>`` names.

    ``unset()`` is the exception a call raises while the variable is unset (the
    library finds no driver), ``missing()`` the one while no state exists there (a
    driver that is not loaded); both are the vendor library's own.
    """

    def __init__(self, env: str, unset: Callable[[], BaseException], missing: Callable[[], BaseException]) -> None:
        self.env = env
        self._unset = unset
        self._missing = missing
        self._lock = threading.RLock()
        self._cache: dict[str, Any] = {}

    def path(self) -> str:
        p = os.environ.get(self.env)
        if not p:
            raise self._unset()
        return p

    def read(self) -> dict:
        """The state (shared, parsed once per write: do not change it; see :meth:`changing`)."""
        with self._lock:
            return self._load(self.path())

    def fresh(self, path: str | os.PathLike[str] | None = None) -> dict:
        """The state read from the file now (a copy the caller may keep), at ``path`` or ``$<env>``."""
        if path is not None:
            return json.loads(Path(path).read_text())
        with self._lock:
            self._cache.clear()
            return self._load(self.path())

    def _load(self, path: str) -> dict:
        _reads[self.env] = _reads.get(self.env, 0) + 1
        c = self._cache
        if c.get("path") == path and c["gen_map"][:8] == c["gen"]:
            return c["state"]
        if c.get("path") != path:
            c.clear()
            try:
                f = open(f"{path}.gen", "rb")
            except FileNotFoundError:
                raise self._missing() from None
            with f:
                c["gen_map"] = mmap.mmap(f.fileno(), 8, access=mmap.ACCESS_READ)
            c["path"] = path
        c["gen"] = c["gen_map"][:8]
        try:
            c["state"] = json.loads(Path(path).read_text())
        except FileNotFoundError:
            c.clear()
            raise self._missing() from None
        return c["state"]

    @contextlib.contextmanager
    def changing(self) -> Iterator[dict]:
        """Read, modify and replace the state under an exclusive lock (several processes share it);
        an exception in the body changes nothing."""
        path = self.path()
        with self._lock, open(f"{path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.fresh()
            yield state
            write_state(path, state)

    def forget(self) -> None:
        """Drop the parsed copy (the next read opens the file again)."""
        with self._lock:
            self._cache.clear()


def install(module: ModuleType, import_name: str, env: str, path: str | os.PathLike[str], monkeypatch: Any = None) -> ModuleType:
    """Make ``import <import_name>`` return the simulated ``module``, driven by the state at ``path``
    (``$<env>``); with pytest's ``monkeypatch`` the change is undone after the test."""
    if monkeypatch is not None:
        monkeypatch.setenv(env, str(path))
        monkeypatch.setitem(sys.modules, import_name, module)
    else:
        os.environ[env] = str(path)
        sys.modules[import_name] = module
    return module


def unsimulated(module: str, prefix: str) -> Callable[[str], Any]:
    """A simulated driver module's ``__getattr__``: a vendor function it does not simulate (a name with
    ``prefix``) fails loudly, naming the module to add it to, instead of pretending."""

    def __getattr__(name: str) -> Any:
        if name.startswith(prefix):
            raise AttributeError(f"the simulated driver {module} does not simulate {name}; add it there")
        raise AttributeError(name)

    return __getattr__


def command_line(module: str, what: str, env: str, setters: str, capability: str) -> argparse.ArgumentParser:
    """The parser of ``python -m <module> PATH [--gpus N] [--privileged | --root-only]``, which writes a
    simulated driver state (``what``: "NVIDIA driver") that zeus then uses with ``$<env>=PATH``;
    ``setters`` names what the privilege allows ("setters", "power caps"), ``capability`` what the
    real driver checks. A driver adds its own options, then :func:`parse_command_line`."""
    p = argparse.ArgumentParser(
        prog=f"python -m {module}", description=f"Write the state of a simulated {what}; then run zeus with {env}=PATH to use it."
    )
    p.add_argument("path", help="driver state file to write (replaced if it exists)")
    p.add_argument("--gpus", type=int, default=1, help="number of simulated GPUs (default 1)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--privileged", action="store_true", help=f"let every process change {setters}; default: none may")
    who.add_argument(
        "--root-only", action="store_true", help=f"let only a process holding {capability} (root) change {setters}, like the real driver"
    )
    return p


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> tuple[argparse.Namespace, bool | str]:
    """The arguments of a :func:`command_line` parser (a GPU count below 1 is its error), and the
    privilege mode they chose."""
    args = parser.parse_args(argv)
    if args.gpus < 1:
        parser.error(f"--gpus must be at least 1, got {args.gpus}")
    return args, "root" if args.root_only else bool(args.privileged)


__all__ = [
    "PRIVILEGE_MODES",
    "SharedState",
    "check_privilege_mode",
    "may_change",
    "write_state",
    "reads",
    "read_since",
    "install",
    "unsimulated",
    "command_line",
    "parse_command_line",
]
