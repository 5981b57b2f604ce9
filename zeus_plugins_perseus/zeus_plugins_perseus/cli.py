"""``zeus perseus ...``: the plan server and the P2P blocking-power measurement.

Heavy imports (FastAPI, uvicorn, torch) happen inside the commands, so adding
the group costs the ``zeus`` command nothing at start-up.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from zeus_core.cli.consoles import make_console, requested_level, verbosity_options
from zeus_core.logs import LEVELS, LogLevelError, configure, level_name, parse_level
from zeus_plugins_perseus.options import MODELS

err_console = Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    sys.exit(code)


@click.group("perseus")
def perseus_group() -> None:
    """Perseus runtime: plan server for pipeline ranks, P2P blocking-power measurement."""


@perseus_group.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind; anything but loopback needs a token.")
@click.option("--port", default=7787, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--profile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Profile CSV that jobs without uploaded profiling results are planned on.",
)
@click.option("--blocking-power-w", type=click.FloatRange(min=0), help="Default P2P blocking power (W) of jobs.")
@click.option("--unit-time-s", default=0.001, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option("--model", default="measured", show_default=True, type=click.Choice(MODELS))
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="File whose first line is the bearer token (default: $ZEUS_PERSEUS_TOKEN).",
)
@click.option(
    "--dump-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep each job's registration, merged uploaded profile and chosen plan here.",
)
@click.option(
    "--log-level",
    type=click.Choice(list(LEVELS), case_sensitive=False),
    help="The server's log level (default: info, moved by -v / -q, or $ZEUS_LOG_LEVEL); wins over both.",
)
@click.option(
    "--max-body-bytes",
    default=1 << 20,
    show_default=True,
    type=click.IntRange(min=1024),
    help="Largest request body accepted (413 beyond).",
)
@click.option(
    "--max-jobs",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Jobs held at once (429 beyond; idle ones are dropped first).",
)
@click.option(
    "--job-idle-s",
    default=7 * 86400.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds after which an untouched job may be dropped.",
)
@click.option(
    "--max-instructions",
    default=2048,
    show_default=True,
    type=click.IntRange(min=2),
    help="Largest 2 x stages x microbatches a job may ask to plan.",
)
@click.option(
    "--plan-cpu-s",
    default=120.0,
    show_default=True,
    type=click.FloatRange(min=1),
    help="CPU seconds one job's planning may use (its process is ended past them; 422).",
)
@click.option(
    "--plan-memory-mib",
    default=3072,
    show_default=True,
    type=click.IntRange(min=256),
    help="Address space (MiB) of one job's planning process (422 past it).",
)
@click.option(
    "--max-planning", default=2, show_default=True, type=click.IntRange(min=1), help="Jobs planned at the same time (429 beyond)."
)
@verbosity_options
def serve_command(
    host,
    port,
    profile,
    blocking_power_w,
    unit_time_s,
    model,
    token_file,
    dump_dir,
    log_level,
    max_body_bytes,
    max_jobs,
    job_idle_s,
    max_instructions,
    plan_cpu_s,
    plan_memory_mib,
    max_planning,
) -> None:
    """Serve per-rank frequency schedules over HTTP (FastAPI on uvicorn)."""
    from zeus_plugins_perseus.profile import ProfileError, read_profile
    from zeus_plugins_perseus.server.app import create_app
    from zeus_plugins_perseus.server.jobs import JobManager, PlannerDefaults, ServerLimits
    from zeus_plugins_perseus.server.run import bind, check_exposure, resolve_token, serve

    # info unless -v / -q / $ZEUS_LOG_LEVEL say otherwise; --log-level (its older knob) wins
    level = requested_level(click.get_current_context(), default=logging.INFO)
    if log_level is not None:
        try:
            level = parse_level(log_level, "--log-level")
        except LogLevelError as e:
            _fail(str(e))
    configure(level)
    try:
        token = resolve_token(token_file)
        check_exposure(host, token)
        prof = read_profile(profile) if profile is not None else None
    except (ValueError, ProfileError, OSError) as e:
        _fail(str(e))
    defaults = PlannerDefaults(profile=prof, blocking_power_w=blocking_power_w, unit_time_s=unit_time_s, model=model)
    limits = ServerLimits(
        max_body_bytes=max_body_bytes,
        max_jobs=max_jobs,
        job_idle_s=job_idle_s,
        max_instructions=max_instructions,
        plan_cpu_s=plan_cpu_s,
        plan_memory_bytes=plan_memory_mib << 20,
        max_planning=max_planning,
    )
    app = create_app(JobManager(defaults, dump_dir, limits), token)
    try:
        sock = bind(host, port)
    except OSError as e:
        _fail(f"cannot listen on {host}:{port}: {e.strerror or e}; choose another --port (0: any free one)")
    # the port it listens on, not the one asked for: --port 0 lets the system choose
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    Console(soft_wrap=True).print(
        f"zeus perseus plan server on http://{shown}:{bound} ({'bearer token required' if token else 'no token: loopback only'})",
        highlight=False,
    )
    try:
        serve(app, host, port, token, level_name(level), sock=sock)
    finally:
        sock.close()


@perseus_group.command("p2p-power")
@click.option(
    "--device", "device_name", default="nvml", show_default=True, help="Device plugin measuring rank 0's GPU (as in job.toml's [device])."
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="An option of that device, as in its [device] table (repeatable).")
@click.option(
    "--duration", default=60.0, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Seconds rank 0 blocks on its receive."
)
@click.option(
    "--backend",
    default="nccl",
    show_default=True,
    type=click.Choice(["nccl", "gloo"]),
    help="nccl: two GPUs, as in training; gloo: CPU tensors.",
)
@click.option("--gpus", default="0,1", show_default=True, help="CUDA indices of rank 0 and rank 1 (nccl).")
def p2p_power_command(device_name, sets, duration, backend, gpus) -> None:
    """Measure the P2P blocking power (W): rank 0 blocks on a receive for --duration seconds."""
    import functools

    from zeus_core import open_device
    from zeus_core.engine import parse_override
    from zeus_plugins_perseus.p2p import P2PError, measure_blocking_power

    options = {}
    try:
        for text in sets:
            path, value = parse_override(text)
            if len(path) != 1:
                raise ValueError(f"--set {text!r}: expected KEY=VALUE of the device's table, e.g. gpus=[0]")
            options[path[0]] = value
        from zeus_core.engine import get_registry

        known = get_registry().names("device")
        if device_name not in known:
            raise ValueError(f"no device plugin named {device_name!r}; installed: {', '.join(known) or 'none'}")
        indices = tuple(int(g) for g in gpus.split(","))
        if len(indices) != 2:
            raise ValueError(f"--gpus must name two CUDA indices, e.g. 0,1; got {gpus!r}")
        pair = (indices[0], indices[1])
    except ValueError as e:
        _fail(str(e))
    console = make_console()  # its result: silent under -q
    console.print(f"measuring P2P blocking power: {backend}, rank 0 blocks for {duration:g} s ...")
    try:
        r = measure_blocking_power(functools.partial(open_device, device_name, options), duration, backend, pair)
    except (P2PError, ValueError) as e:
        _fail(str(e), 1)
    console.print(
        f"P2P blocking power: [bold]{r.watts:.2f} W[/] ({r.joules:.1f} J over {r.seconds:.2f} s on "
        f"{', '.join(r.devices)}); use it as blocking_power_w"
    )
