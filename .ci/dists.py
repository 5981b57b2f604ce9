"""Build every distribution as a packager would and install each wheel alone.

    python .ci/dists.py OUT_DIR [--only NAME ...]

For each distribution of ``zeus_core/catalog.toml``: ``uv build`` (the sdist, then the wheel
from it, so a file missing from the sdist fails here); the wheel and the sdist hold LICENSE,
the wheel's METADATA has the SPDX license, the README as its description, classifiers,
URLs and ``py.typed``; then the wheel is installed, non-editable, into a fresh venv with
only what it declares (zeus-core from the wheels built here), its package imports, and
``zeus plugins --json`` lists its entry point. Torch comes from the machine's local CPU
wheel (``pip download torch==2.13.0``), never resolved from the index. In zeus-core's venv,
``python -m zeus_core.docgen`` run outside a checkout refuses without writing into
site-packages, and a plugin type-checked with mypy against the installed core finds its types.
"""

from __future__ import annotations

import argparse
import email
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
UV = (sys.executable, "-m", "uv")  # uv from pip (pip install uv): its scripts' folder need not be on PATH
TORCH = "torch==2.13.0"  # the machine's local CPU wheel (pip's find-links); a range would pull CUDA builds

TINY_PLUGIN = '''\
"""A third party's plugin, type-checked against the installed zeus-core."""
import attrs
from zeus_core import BuildContext, PolicyContext, TryRecord, hookimpl, zeus_cost
from zeus_core.hookspecs import RegisterPart


@attrs.define
class Options:
    size: int = 32


class Fixed:
    def __init__(self, options: Options, context: BuildContext) -> None:
        self.size = options.size

    def choose(self, ctx: PolicyContext) -> int:
        return self.size

    def observe(self, ctx: PolicyContext, record: TryRecord) -> None:
        self.cost: float = zeus_cost(record.energy_j, record.time_s, 0.5, 300.0)


@hookimpl
def zeus_register_batch_size_policies(register: RegisterPart) -> None:
    register("tiny", Fixed, options=Options)
'''


def run(*cmd: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}")
    return r


def check_artifacts(out: Path, dist: str, folder: Path) -> Path:
    stem = dist.replace("-", "_")
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    wheel = out / f"{stem}-{project['version']}-py3-none-any.whl"
    sdist = out / f"{stem}-{project['version']}.tar.gz"
    problems = []
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = f"{stem}-{project['version']}.dist-info"
        meta = email.message_from_string(z.read(f"{info}/METADATA").decode())
    package = "zeus_core" if dist == "zeus-core" else folder.name
    if f"{info}/licenses/LICENSE" not in names:
        problems.append("the wheel has no LICENSE")
    if f"{package}/py.typed" not in names:
        problems.append("the wheel has no py.typed")
    if meta["License-Expression"] != "Apache-2.0":
        problems.append(f"License-Expression is {meta['License-Expression']!r}")
    if not meta.get_all("Classifier") or not meta.get_all("Project-URL"):
        problems.append("no classifiers or project URLs")
    if meta["Description-Content-Type"] != "text/markdown" or not meta.get_payload().startswith(f"# {dist}"):
        problems.append("the description is not the distribution's README")
    with tarfile.open(sdist) as t:
        if f"{sdist.name.removesuffix('.tar.gz')}/LICENSE" not in t.getnames():
            problems.append("the sdist has no LICENSE")
    if problems:
        sys.exit(f"{dist}: " + "; ".join(problems))
    return wheel


def torch_wheel(out: Path) -> Path:
    """The local CPU wheel of torch, fetched once by pip (whose configuration finds it), installed by uv
    from its file in each venv that needs it (uv links it from its cache: seconds, not pip's minute)."""
    folder = out / "torch"
    if not folder.is_dir():
        run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", folder, TORCH)
    return next(folder.glob("torch-*.whl"))


def install_alone(out: Path, dist: str, folder: Path, wheel: Path, venvs: Path) -> None:
    venv = venvs / dist
    run(*UV, "venv", "-q", "--seed", "-p", sys.executable, venv)
    py = venv / "bin" / "python"
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    if any(
        r.split(">")[0].split("[")[0].strip() in ("torch", "lightning") or r.startswith("transformers[torch]")
        for r in project.get("dependencies", [])
    ):
        run(*UV, "pip", "install", "-q", "-p", py, torch_wheel(out))
    run(*UV, "pip", "install", "-q", "-p", py, "--find-links", out, wheel)
    package = "zeus_core" if dist == "zeus-core" else folder.name
    run(py, "-c", f"import {package}")
    env = dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
    listed = json.loads(run(venv / "bin" / "zeus", "plugins", "--json", env=env, cwd=venvs).stdout)
    if dist != "zeus-core":
        eps = project.get("entry-points", {}).get("zeus", {})
        missing = set(eps) - {p["name"] for p in listed}
        if missing:
            sys.exit(f"{dist}: zeus plugins does not list {sorted(missing)}")
    else:
        check_core(venv, py, venvs)


def check_core(venv: Path, py: Path, venvs: Path) -> None:
    here = venvs / "elsewhere"
    here.mkdir()
    r = run(py, "-m", "zeus_core.docgen", "--check", cwd=here, check=False)
    site = Path(run(py, "-c", "import zeus_core, pathlib; print(pathlib.Path(zeus_core.__file__).parent.parent)", cwd=here).stdout.strip())
    if site.name != "site-packages":
        sys.exit(f"zeus_core imported from {site}, not the installed wheel")
    if r.returncode != 2 or "site-packages" in r.stderr or (site / "docs").exists():
        sys.exit(f"docgen outside a checkout: exit {r.returncode}: {r.stderr}")
    run(py, "-m", "zeus_core.docgen", cwd=here, check=False)
    if (site / "docs").exists() or any(here.iterdir()):
        sys.exit("docgen wrote files outside a docs folder it was given")
    run(*UV, "pip", "install", "-q", "-p", py, "mypy>=1.10")
    (here / "tiny_plugin.py").write_text(TINY_PLUGIN)
    r = run(py, "-m", "mypy", "--strict", "--no-incremental", "tiny_plugin.py", cwd=here, check=False)
    if r.returncode != 0:
        sys.exit(f"mypy on a plugin against the installed zeus-core:\n{r.stdout}{r.stderr}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", nargs="*", help="distributions to check (default: all)")
    args = ap.parse_args()
    folders = tomllib.loads((REPO / "zeus_core" / "catalog.toml").read_text())["folders"]
    chosen = args.only or list(folders)
    shutil.rmtree(args.out, ignore_errors=True)
    dist_dir, venvs = args.out / "dist", args.out / "venvs"
    venvs.mkdir(parents=True)
    for dist in dict.fromkeys(["zeus-core", *chosen]):  # the plugins install zeus-core from here
        start = time.monotonic()
        run(*UV, "build", "-q", "--out-dir", dist_dir, REPO / folders[dist])
        wheel = check_artifacts(dist_dir, dist, REPO / folders[dist])
        built = time.monotonic() - start
        if dist in chosen:
            install_alone(dist_dir, dist, REPO / folders[dist], wheel, venvs)
        print(f"ok {dist}: built {built:.0f} s, installed alone {time.monotonic() - start - built:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
