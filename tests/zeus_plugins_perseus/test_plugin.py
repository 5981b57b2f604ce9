"""`zeus run` / `zeus validate` on jobs with ``[frequency_plan] plugin = "perseus"``."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from zeus_core.cli import main as zcli
from zeus_core.engine import registry as zreg

REPO = Path(__file__).resolve().parents[2]


def zeus(*args):
    return CliRunner().invoke(zcli.cli, list(args), obj={"registry": zreg.load()}, catch_exceptions=False)


def job(tmp_path, profile, **keys):
    table = {"plugin": "perseus", "profile": str(profile), "microbatches": 3, "blocking_power_w": 83.64, **keys}
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in table.items())
    path = tmp_path / "job.toml"
    path.write_text(f'[job]\nname = "p"\n\n[frequency_plan]\n{body}\n')
    return path


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_registered_as_frequency_plan_policy():
    assert "perseus" in zreg.load().names("frequency_plan_policy")


def test_run_writes_frontier_plans_and_figures(tmp_path, gpt3_a100):
    out = tmp_path / "out"
    r = zeus("run", str(job(tmp_path, gpt3_a100)), "--output", str(out))
    assert r.exit_code == 0, r.output
    rows = read_rows(out / "frontier.csv")
    assert list(rows[0]) == ["plan", "iteration_time_s", "energy_j", "emulated_time_s", "emulated_energy_j"]
    times = [float(r["iteration_time_s"]) for r in rows]
    emulated_t = [float(r["emulated_time_s"]) for r in rows]
    emulated_e = [float(r["emulated_energy_j"]) for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times)  # fastest first, one per unit
    # the emulated frontier: strictly slower and strictly less energy, plan after plan
    assert all(b > a for a, b in zip(emulated_t, emulated_t[1:]))
    assert all(b < a for a, b in zip(emulated_e, emulated_e[1:]))
    assert all(float(r["emulated_time_s"]) <= float(r["iteration_time_s"]) + 1e-9 for r in rows)
    plans = sorted((out / "plans").glob("*.json"))
    assert [p.name for p in plans[:2]] == ["00000.json", "00001.json"] and len(plans) == len(rows)
    plan = json.loads(plans[-1].read_text())
    assert plan["iteration_time_s"] == pytest.approx(times[-1])
    assert len(plan["stages"]) == 8
    s0 = plan["stages"][0]
    assert s0["instructions"] == ["forward", "forward", "forward", "backward", "backward", "backward"]
    assert all(850 <= f <= 1410 for f in s0["frequencies"])
    for name in ("frontier.png", "timeline.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    chosen = json.loads((out / "summary.json").read_text())["frequency_plan"]["chosen"]
    assert chosen["plan"] == 0 and chosen["meets_limit"]  # the real-time plan at exactly the all-max time
    assert 0.05 < chosen["energy_saving_vs_max"] < 0.5
    assert "Perseus" in r.output and "chosen plan" in r.output
    # a published profile, measured on real GPUs: no simulated driver named
    assert chosen["profile_simulated"] == [] and "energy against all max clocks (emulated on the profile)" in " ".join(r.output.split())


def test_deadline_picks_least_energy_plan_that_meets_it(tmp_path, gpt3_a100):
    out = tmp_path / "out"
    r = zeus("run", str(job(tmp_path, gpt3_a100, deadline=1.75, schedule="gpipe")), "--output", str(out))
    assert r.exit_code == 0, r.output
    rows = read_rows(out / "frontier.csv")
    ok = [r for r in rows if float(r["emulated_time_s"]) <= 1.75]
    best = min(ok, key=lambda r: float(r["emulated_energy_j"]))
    chosen = json.loads((out / "chosen_plan.json").read_text())
    assert chosen["plan"] == int(best["plan"])
    assert chosen["emulated_time_s"] <= 1.75


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"schedule": "zb"}, "schedule must be one of '1f1b', 'gpipe'"),
        ({"model": "linear"}, "model must be one of 'measured', 'exponential'"),
        ({"unit_time_s": 0}, "unit_time_s must be positive"),
        ({"max_slowdown": 0.9}, "max_slowdown must be at least 1"),
        ({"deadline": 3.0, "max_slowdown": 1.1}, "not both"),
        ({"stages": 4}, "has 8 stage(s) but the job asks for 4"),
        ({"max_gap_plans": -1}, "max_gap_plans must be"),
    ],
)
def test_bad_options_are_reported(tmp_path, gpt3_a100, keys, message):
    r = zeus("run", str(job(tmp_path, gpt3_a100, **keys)))
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split())


def test_bad_profile_line_is_reported(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("stage,instruction,frequency,time,energy\n0,forward,1410,0.05,20\n0,backward,1410,nan,40\n")
    r = zeus("run", str(job(tmp_path, bad)))
    assert r.exit_code == 2
    assert "bad.csv:3: column 'time' is NaN" in " ".join(r.output.split())


@pytest.mark.parametrize("example", sorted(p.parent.name for p in (REPO / "examples" / "perseus").glob("*/job.toml")))
def test_examples_validate(example):
    r = zeus("validate", str(REPO / "examples" / "perseus" / example / "job.toml"))
    assert r.exit_code == 0, r.output


def dominated_rows(rows):
    """Rows another row beats on both emulated time and energy (at least as good in both, better in one)."""
    pts = [(float(r["emulated_time_s"]), float(r["emulated_energy_j"])) for r in rows]
    return [i for i, (t, e) in enumerate(pts) if any(t2 <= t and e2 <= e and (t2, e2) != (t, e) for t2, e2 in pts)]


@pytest.mark.parametrize("model", ["exponential", "measured"])
def test_frontier_lists_only_pareto_optimal_plans_and_reports_over_them(tmp_path, gpt3_a100, model):
    """The published model's solver emits plans that others beat; none of them may be listed or chosen."""
    out = tmp_path / "out"
    r = zeus("run", str(job(tmp_path, gpt3_a100, microbatches=6, model=model, deadline=2.0)), "--output", str(out))
    assert r.exit_code == 0, r.output
    rows = read_rows(out / "frontier.csv")
    assert dominated_rows(rows) == []
    assert [int(r["plan"]) for r in rows] == list(range(len(rows)))
    assert len(list((out / "plans").glob("*.json"))) == len(rows)
    energies = [float(r["emulated_energy_j"]) for r in rows]
    summary = json.loads((out / "summary.json").read_text())["frequency_plan"]
    # the deadline picks the least energy among listed plans that meet it
    ok = [r for r in rows if float(r["emulated_time_s"]) <= 2.0]
    assert summary["chosen"]["plan"] == int(min(ok, key=lambda r: float(r["emulated_energy_j"]))["plan"])
    least = f"{min(energies):,.1f}"
    assert any(line.startswith("│ least-energy") and least in line for line in r.output.splitlines()), r.output
    if model == "exponential":
        emitted = read_rows(out / "published_plans.csv")
        assert len(emitted) > len(rows) and dominated_rows(emitted)  # what the solver emits is not all optimal
        listed = [int(e["listed_as"]) for e in emitted if e["listed_as"]]
        assert sorted(listed) == list(range(len(rows)))  # every listed plan is one the solver emitted
        for e in emitted:
            if e["listed_as"]:
                row = rows[int(e["listed_as"])]
                assert float(row["emulated_energy_j"]) == float(e["emulated_energy_j"])
        # the solver's plan of least emulated energy is the last listed, not the last emitted
        assert float(emitted[-1]["emulated_energy_j"]) > min(energies)
    else:
        assert not (out / "published_plans.csv").exists()


def test_registration_module_imports_nothing_heavy(tmp_path):
    """`zeus --help` loads the plugin; the planner's and runtime's heavy dependencies must wait for a part or command."""
    import subprocess
    import sys

    code = (
        "import sys, zeus_plugins_perseus.plugin as p\n"
        "heavy = ('numpy', 'scipy', 'matplotlib', 'torch', 'fastapi', 'httpx', 'uvicorn')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_plan_files_written_together_are_the_single_plan_text(tmp_path, gpt3_a100):
    """write_plans encodes the fixed parts once; every file must still be write_plan's JSON, byte for byte."""
    from zeus_plugins_perseus.planner import plan_frontier
    from zeus_plugins_perseus.profile import read_profile

    ps = plan_frontier(read_profile(gpt3_a100), 8, 3, "gpipe", 0.001, 83.64, "exponential")
    # files of an earlier run are rewritten in place and cut to length: longer and shorter ones both end up exact
    (tmp_path / "00000.json").write_text("x" * 100_000)
    (tmp_path / "00001.json").write_text("{}")
    ps.write_plans(tmp_path)
    for k in (0, 1, len(ps) // 2, len(ps) - 1):
        one = ps.write_plan(k, tmp_path / "one.json").read_text()
        assert (tmp_path / f"{k:05d}.json").read_text() == one
        assert json.loads(one)["stages"][3]["frequencies"] == ps.frequencies[k, ps.dag.stage_ops(3)].tolist()


def test_plan_files_are_the_single_plan_text_for_any_clocks(tmp_path, gpt3_a100):
    """The clocks' text is made for blocks of plans at once (fixed-width fields, padding dropped): clocks of 1 to 5
    digits side by side, plans across blocks and a range that starts mid-way must all be write_plan's text."""
    import attrs

    from zeus_plugins_perseus.emulator import CHUNK_PLANS
    from zeus_plugins_perseus.planner import plan_frontier
    from zeus_plugins_perseus.profile import read_profile

    ps = plan_frontier(read_profile(gpt3_a100), 8, 2, "1f1b", 0.001, 83.64, "exponential")
    n = CHUNK_PLANS + 7
    rng = np.random.default_rng(3)
    clocks = rng.choice([0, 7, 42, 990, 1410, 12345], size=(n, ps.dag.n_ops))
    many = attrs.evolve(
        ps,
        frequencies=clocks,
        time_units=np.resize(ps.time_units, n),
        planned_energy_j=np.resize(ps.planned_energy_j, n),
        emulated_time_s=np.resize(ps.emulated_time_s, n),
        emulated_energy_j=np.resize(ps.emulated_energy_j, n),
    )
    many.write_plans(tmp_path, range(3, n))
    assert not (tmp_path / "00002.json").exists()
    for k in range(3, n):
        assert (tmp_path / f"{k:05d}.json").read_text() == many.write_plan(k, tmp_path / "one.json").read_text(), k


def test_max_gap_plans_bounds_the_real_time_plans_at_the_fast_end(tmp_path, gpt3_a100):
    """Each gap plan is one linear program; the key trades the fast end's resolution for planning time."""
    runs = {}
    for gap in (0, 32):
        out = tmp_path / f"gap{gap}"
        r = zeus("run", str(job(tmp_path, gpt3_a100, microbatches=6, max_gap_plans=gap)), "--output", str(out))
        assert r.exit_code == 0, r.output
        rows = read_rows(out / "frontier.csv")
        # real-time plans are the rows whose planned time is not a whole number of 1 ms units
        runs[gap] = sum(abs(float(x["iteration_time_s"]) * 1000 - round(float(x["iteration_time_s"]) * 1000)) > 1e-6 for x in rows)
    assert runs[0] == 1 and runs[32] > 1  # without gap plans only the zero-slowdown plan is real-time
