"""Command overrides: the daemon's GPU setters run as commands a site allows, instead of the vendor library.

Why: on sites that never grant root (nor ``CAP_SYS_ADMIN``) to a long-running
process, the administrators still allow a few commands through sudo, such as
``sudo nvidia-smi -i 0 -pl 300``. ``[overrides]`` in the daemon's configuration
maps upstream zeusd's setter names to such commands, one argv list each::

    [overrides]
    set_power_limit = ["sudo", "-n", "nvidia-smi", "-i", "{index}", "-pl", "{watts}"]
    set_gpu_locked_clocks = ["sudo", "-n", "nvidia-smi", "-i", "{index}", "-lgc", "{min_mhz},{max_mhz}"]
    reset_gpu_locked_clocks = ["sudo", "-n", "nvidia-smi", "-i", "{index}", "-rgc"]

Everything else stays as without overrides: the request is checked against the
GPU (served, inside its range, a supported clock) with the library's reads,
which need no privilege; the original is journaled; the caller holds the
setting; and putting it back (a client that leaves, a reset, the daemon's exit,
the next start after a SIGKILL) runs the override too: a power limit goes back
through ``set_power_limit`` with the original watts, a clock lock through the
``reset_*`` command, which is therefore required next to its ``set_*``.

A command runs without a shell (the list is the argv; a placeholder fills one
argument, never splits it), with stdin closed, at most ``override_timeout_s``;
a non-zero exit fails the request (HTTP 500) naming the command, its status
and its stderr. Placeholders are checked when the configuration is read: an
unknown one, a command that is empty, or a ``set_*`` without its ``reset_*`` is
an error naming the line.
"""

from __future__ import annotations

import shlex
import string
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from zeus_core.engine.validation import Problem, suggest
from zeus_core.privileged import OperationFailed


@attrs.frozen
class Setter:
    """One setter that may be overridden: the journal's ``setting`` it changes (in ``gpu:<UUID>:<setting>``
    keys) and the placeholders its command may use."""

    setting: str
    placeholders: tuple[str, ...]
    resets: bool = False


_GPU = ("index", "uuid")
_CLOCKS = (*_GPU, "min_mhz", "max_mhz")
#: the setters an override may replace, by upstream zeusd's names (its routes')
SETTERS: dict[str, Setter] = {
    "set_power_limit": Setter("power_limit", (*_GPU, "watts", "milliwatts")),
    "set_gpu_locked_clocks": Setter("locked_clocks", _CLOCKS),
    "reset_gpu_locked_clocks": Setter("locked_clocks", _GPU, resets=True),
    "set_mem_locked_clocks": Setter("locked_memory_clocks", _CLOCKS),
    "reset_mem_locked_clocks": Setter("locked_memory_clocks", _GPU, resets=True),
}
_SAMPLE = {"index": 0, "uuid": "GPU-00000000", "watts": 300, "milliwatts": 300000, "min_mhz": 1410, "max_mhz": 1410}


def problems(overrides: Any) -> list[Problem]:
    """What is wrong with the ``[overrides]`` table: every problem with its path (so its line)."""
    out: list[Problem] = []
    if not isinstance(overrides, dict):
        return [Problem(("overrides",), "overrides must be a table of setter = [command, args...]")]
    for name, argv in overrides.items():
        path: tuple[Any, ...] = ("overrides", name)
        setter = SETTERS.get(name)
        if setter is None:
            out.append(Problem(path, f"no setter named {name!r}{suggest(name, SETTERS)}; the setters are {', '.join(SETTERS)}"))
            continue
        if not isinstance(argv, list) or not argv:
            example = '["sudo", "-n", "nvidia-smi", ...]'
            out.append(Problem(path, f"{name} must be a command as a list of strings, e.g. {example}, got {argv!r}"))
            continue
        for i, arg in enumerate(argv):
            if not isinstance(arg, str) or not arg:
                out.append(Problem((*path, i), f"each argument of {name}'s command must be a non-empty string, got {arg!r}"))
                continue
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(arg) if f is not None]
            except ValueError as e:
                out.append(Problem((*path, i), f"{arg!r}: {e} (a literal brace is written {{{{ or }}}})"))
                continue
            unknown = [f for f in fields if f not in setter.placeholders]
            if unknown:
                out.append(
                    Problem(
                        (*path, i),
                        f"{arg!r}: unknown placeholder {{{unknown[0]}}}; {name} knows "
                        + ", ".join(f"{{{p}}}" for p in setter.placeholders),
                    )
                )
                continue
            try:
                arg.format(**_SAMPLE)
            except (ValueError, KeyError, IndexError) as e:
                out.append(Problem((*path, i), f"{arg!r} cannot be filled in: {e}"))
    for name, setter in SETTERS.items():
        reset = name.replace("set_", "reset_", 1)
        if name in overrides and not setter.resets and reset in SETTERS and reset not in overrides:
            out.append(
                Problem(
                    ("overrides", name),
                    f"{name} is overridden but {reset} is not: the daemon unlocks the clocks with it when the client "
                    f"leaves, and the library cannot without privilege; add {reset} = [...]",
                )
            )
    return out


class Overrides:
    """The configured overrides of one daemon, for the GPUs of its service ``service`` (the others'
    settings go through their vendor library). ``served()`` gives its services (built after this),
    whose ``gpus.gpus`` tables map a GPU's UUID to its (index, handle)."""

    def __init__(
        self, commands: Mapping[str, list[str]], timeout_s: float, served: Callable[[], Mapping[str, Any]], service: str | None
    ) -> None:
        self.commands = dict(commands)
        self.timeout_s = timeout_s
        self._served = served
        #: the service (and journal owner) whose settings the commands change; the others' settings
        #: go through their vendor library as without overrides
        self.service = service
        self._args: dict[str, Any] | None = None  # the arguments of the operation running now (on the device thread)

    def __bool__(self) -> bool:
        return bool(self.commands)

    # -- the daemon's calls --

    def running(self, method: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``method`` (a service's operation), knowing its arguments while it runs: what a set command is filled with."""
        if not self.commands:
            return method

        def run(parsed: Any, session: Any) -> Any:
            self._args = attrs.asdict(parsed) if attrs.has(type(parsed)) else None
            try:
                return method(parsed, session)
            finally:
                self._args = None

        return run

    def setter(self, owner: str, key: str, apply: Callable[[], Any]) -> Callable[[], Any]:
        """What a change of ``owner``'s ``key`` runs: the override's command when one is set for it, else ``apply``."""
        parsed = _key(key)
        if parsed is None or self._args is None or owner != self.service:
            return apply
        uuid, setting = parsed
        name = next((n for n, s in SETTERS.items() if s.setting == setting and not s.resets and n in self.commands), None)
        if name is None:
            return apply
        args = self._args
        if setting == "power_limit":
            values = _power(args["milliwatts"])
        else:
            values = {"min_mhz": int(args["min_mhz"]), "max_mhz": int(args["max_mhz"])}
        return lambda: self.run(name, uuid, values)

    def resetter(self, owner: str, key: str, reset: Callable[[], Any] | None) -> Callable[[], Any] | None:
        """What a reset of ``owner``'s ``key`` nobody holds runs: the ``reset_*`` override when one is set, else ``reset``."""
        parsed = _key(key) if owner == self.service else None
        name = self._reset_name(parsed[1]) if parsed is not None and reset is not None else None
        if name is None or parsed is None:
            return reset
        return lambda: self.run(name, parsed[0], {})

    def wrap(self, restorers: Mapping[str, Callable[[str, Any], Any]]) -> dict[str, Callable[[str, Any], Any]]:
        """The restorers, each putting back an overridden setting through its command."""
        if not self.commands:
            return dict(restorers)
        return {owner: self._restorer(fn) if owner == self.service else fn for owner, fn in restorers.items()}

    def _restorer(self, fallback: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
        def restore(key: str, original: Any) -> Any:
            parsed = _key(key)
            if parsed is not None:
                uuid, setting = parsed
                if setting == "power_limit" and "set_power_limit" in self.commands and original is not None:
                    return self.run("set_power_limit", uuid, _power(original))
                reset = self._reset_name(setting)
                if reset is not None and original is None:
                    return self.run(reset, uuid, {})
                set_name = next((n for n, s in SETTERS.items() if s.setting == setting and not s.resets and n in self.commands), None)
                if set_name is not None and isinstance(original, (list, tuple)) and len(original) == 2:
                    return self.run(set_name, uuid, {"min_mhz": int(original[0]), "max_mhz": int(original[1])})
            return fallback(key, original)

        return restore

    def _reset_name(self, setting: str) -> str | None:
        return next((n for n, s in SETTERS.items() if s.setting == setting and s.resets and n in self.commands), None)

    # -- running a command --

    def index_of(self, uuid: str) -> int:
        for svc in self._served().values():
            table = getattr(getattr(svc, "gpus", None), "gpus", None)
            if isinstance(table, dict) and uuid in table:
                return int(table[uuid][0])
        raise OperationFailed(f"GPU {uuid} is not served by this daemon, so its index for the override is unknown")

    def run(self, name: str, uuid: str, values: dict[str, Any]) -> None:
        """Run ``name``'s command for GPU ``uuid`` filled with ``values``; OperationFailed naming it when it fails."""
        filled = {"index": self.index_of(uuid), "uuid": uuid, **values}
        argv = [arg.format(**filled) for arg in self.commands[name]]
        shown = shlex.join(argv)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise OperationFailed(
                f"the {name} override `{shown}` did not finish within {self.timeout_s:g} s (override_timeout_s) and was killed"
            ) from None
        except OSError as e:
            raise OperationFailed(f"the {name} override `{shown}` cannot run: {e.strerror or e}") from None
        if done.returncode != 0:
            stderr = done.stderr.strip()[-1000:] or "(nothing on stderr)"
            raise OperationFailed(f"the {name} override `{shown}` exited with status {done.returncode}: {stderr}")


def _key(key: str) -> tuple[str, str] | None:
    """(UUID, setting) of a ``gpu:<UUID>:<setting>`` journal key, else None."""
    parts = key.split(":")
    return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "gpu" else None


def _power(milliwatts: Any) -> dict[str, Any]:
    mw = int(milliwatts)
    return {"milliwatts": mw, "watts": mw // 1000 if mw % 1000 == 0 else mw / 1000}
