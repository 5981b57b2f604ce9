"""``zeus traces synth|fetch|alibaba-synth``: make trace folders and group files without leaving the command line."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from zeus_core.cli.consoles import make_console
from zeus_core.files import atomic_path, cannot_write

# synth and traces need numpy: they are imported inside the commands, so `zeus --help` stays light.
from zeus_plugins_trace.folders import POWER_PATTERN, TRAIN_FILE

#: Where the public NSDI'23 traces live in the Zeus repository.
DEFAULT_BASE_URL = "https://raw.githubusercontent.com/ml-energy/zeus/master/examples/research_reproducibility/zeus_nsdi23/trace"
GPUS = ("v100", "a40", "p100", "rtx6000")

console = make_console()
err_console = make_console(stderr=True)


@click.group("traces")
def traces_group() -> None:
    """Make Zeus NSDI'23 trace folders: synthetic (no download) or the public ones."""


@traces_group.command("synth")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder to write the traces into.")
@click.option("--seed", default=0, show_default=True, help="Seed of the runs' epochs to target.")
def synth_cmd(out: Path, seed: int) -> None:
    """Write a synthetic train trace and power traces for v100, a40, p100 and rtx6000."""
    from zeus_plugins_trace import synth

    try:
        written = synth.write(out, seed)
    except OSError as e:  # a full or read-only disk: the file it names was not written (each one is whole or absent)
        raise click.ClickException(cannot_write(e)) from None
    for path in written:
        console.print(f"wrote {escape(str(path))}")
    console.print("[yellow]synthetic[/]: made by a parametric model (zeus_plugins_trace.synth), not measured on any GPU")


@traces_group.command("alibaba-synth")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Group file to write (CSV).")
@click.option("--groups", default=100, show_default=True, type=click.IntRange(min=1), help="How many recurring groups.")
@click.option("--seed", default=0, show_default=True, help="Seed of the generator.")
def alibaba_synth_cmd(out: Path, groups: int, seed: int) -> None:
    """Write a synthetic group file in the NSDI'23 Alibaba format (periodic, bursty and sequential groups)."""
    from zeus_plugins_trace import groupsynth

    try:
        path = groupsynth.write(out, groups, seed)
    except OSError as e:  # a full or read-only disk: nothing was written to --out
        raise click.ClickException(cannot_write(e, f"--out {out}")) from None
    console.print(f"wrote {escape(str(path))}")
    console.print(
        "[yellow]synthetic[/]: arrival and overlap patterns from a parametric model "
        "(zeus_plugins_trace.groupsynth), not the Alibaba trace; its pattern column says which"
    )


def fetch(out: Path, base_url: str = DEFAULT_BASE_URL, gpus: tuple[str, ...] = GPUS, timeout: float = 60.0) -> list[Path]:
    """Download the train trace and the power traces of ``gpus`` into ``out``.

    Each file is checked with the same reader ``zeus run`` uses before it is
    put in place, so a failed or garbled download leaves no file behind.
    """
    import urllib.error
    import urllib.request

    from zeus_plugins_trace.traces import TraceError, read_power, read_train

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in (TRAIN_FILE, *(POWER_PATTERN.format(gpu=g) for g in gpus)):
        url = f"{base_url.rstrip('/')}/{name}"
        target = out / name
        with atomic_path(target) as tmp:  # a failed or garbled download leaves no file behind
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    tmp.write_bytes(resp.read())
            except (urllib.error.URLError, OSError) as e:
                raise click.ClickException(f"cannot download {url}: {getattr(e, 'reason', e)}; check --base-url or the network") from None
            try:
                (read_train if name == TRAIN_FILE else read_power)(tmp)
            except TraceError as e:
                raise click.ClickException(f"{url} is not a valid trace: {e}") from None
        written.append(target)
    return written


@traces_group.command("fetch")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder to write the traces into.")
@click.option("--base-url", default=DEFAULT_BASE_URL, show_default=True, help="URL of the folder holding the trace files.")
@click.option("--gpu", "gpus", multiple=True, type=click.Choice(GPUS), help="Power traces to fetch (default: all four).")
def fetch_cmd(out: Path, base_url: str, gpus: tuple[str, ...]) -> None:
    """Download the public Zeus NSDI'23 train and power traces."""
    for path in fetch(out, base_url, gpus or GPUS):
        console.print(f"wrote {escape(str(path))}")
