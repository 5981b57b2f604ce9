"""Run Python code as an unprivileged user, in a fresh process started by root.

    python run_unprivileged.py UID GID BEFORE CODE [ARGS...]

``BEFORE`` runs as root, then the process drops to ``UID``/``GID`` for good
(no supplementary groups; ``setresuid`` away from 0 clears every
capability), then ``CODE`` runs with ``sys.argv = ["client", *ARGS]``. It is a
real unprivileged process, with its own pid and the kernel's view of its
credentials: what the code does as that user, the kernel checks as for any
user.

The interpreter's standard library may live where that user cannot go (pyenv
under ``/root``, mode 0700, as on the CI machines). Before the drop, every
``sys.path`` folder behind such a folder is opened, and the path replaced by
``/proc/self/fd/N``: the open descriptor reaches the folder without searching
its parents, so modules Python imports lazily still load. Nothing on the
machine is changed for it.
"""

from __future__ import annotations

import os
import sys


def _reachable_by_others(path: str) -> bool:
    """Whether every folder above ``path`` lets other users through (o+x)."""
    parent = os.path.dirname(os.path.abspath(path))
    while True:
        try:
            if not os.stat(parent).st_mode & 0o001:
                return False
        except OSError:
            return False
        up = os.path.dirname(parent)
        if up == parent:
            return True
        parent = up


def keep_import_path() -> None:
    """Reach the import path (and imported packages' own folders) through open descriptors."""
    moved: dict[str, str] = {}
    for i, entry in enumerate(sys.path):
        if entry and os.path.isdir(entry) and not _reachable_by_others(entry):
            moved[entry] = f"/proc/self/fd/{os.open(entry, os.O_RDONLY | os.O_DIRECTORY)}"
            sys.path[i] = moved[entry]
    for module in list(sys.modules.values()):
        path = getattr(module, "__path__", None)
        if not isinstance(path, list):
            continue
        for i, folder in enumerate(path):
            for old, new in moved.items():
                if folder.startswith(old + os.sep):
                    path[i] = new + folder[len(old) :]
                    break
    sys.path_importer_cache.clear()


def drop(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    assert os.geteuid() == uid and os.getegid() == gid


def main() -> None:
    uid, gid, before, code, *args = sys.argv[1:]
    exec(compile(before, "<before>", "exec"), {"__name__": "__before__"})
    keep_import_path()
    drop(int(uid), int(gid))
    sys.argv = ["client", *args]
    exec(compile(code, "<client>", "exec"), {"__name__": "__main__"})


if __name__ == "__main__":
    main()
