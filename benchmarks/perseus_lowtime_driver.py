"""Run the published solver (lowtime 0.3.0 from PyPI) on a profile, the way the paper's artifact does.

Invoked by ``perseus_frontier.py`` in a subprocess (so that it can use another
interpreter that has lowtime installed); prints one JSON object: every
emitted plan's quantised time and fitted cost, and the solver's wall time.
Only lowtime's public classes are used; this file contains no lowtime code.

    python perseus_lowtime_driver.py PROFILE STAGES MICROBATCHES UNIT_S BLOCKING_W
"""

from __future__ import annotations

import csv
import json
import sys
import time

import networkx as nx
from lowtime.cost_model import ExponentialModel
from lowtime.graph_utils import add_sink_node, add_source_node
from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
from lowtime.perseus.instruction import Backward, Forward
from lowtime.perseus.schedule import Synchronous1F1B
from lowtime.solver import PhillipsDessouky


def specs(path: str, unit: float, blocking_w: float) -> dict:
    rows: dict[tuple[int, str], list] = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.setdefault((int(r["stage"]), r["instruction"]), []).append(
                ExecutionOption(real_time=float(r["time"]), unit_time=unit, cost=float(r["energy"]), knob=int(r["frequency"]))
            )
    out = {}
    for key, options in rows.items():
        if key[1] not in ("forward", "backward"):
            continue
        cand = CandidateExecutionOptions(options=list(options), noise_factor=1.0)
        if len(cand.options) <= 3:
            cand = CandidateExecutionOptions(options=list(options), noise_factor=0.95)
        # The artifact filters on raw energy, then makes the cost effective (minus blocking energy).
        for o in cand.options:
            o.cost -= blocking_w * o.quant_time * unit
        out[key] = OperationSpec(options=cand, cost_model=ExponentialModel(cand, search_strategy="best"))
    return out


def dag(stages: int, microbatches: int, op_specs: dict) -> nx.DiGraph:
    g = nx.DiGraph()
    node = 2
    where = {}
    for s in range(stages):
        spec_map = {Forward: op_specs[(s, "forward")], Backward: op_specs[(s, "backward")]}
        prev = None
        for inst in Synchronous1F1B(stages, microbatches, s, spec_map):
            g.add_node(node, op=inst)
            where[(type(inst), inst.stage_id, inst.micro_batch_id)] = node
            if prev is not None:
                g.add_edge(prev, node)
            prev = node
            node += 1
    for (kind, s, j), v in where.items():
        if kind is Forward and (Forward, s + 1, j) in where:
            g.add_edge(v, where[(Forward, s + 1, j)])
        if kind is Backward and (Backward, s - 1, j) in where:
            g.add_edge(v, where[(Backward, s - 1, j)])
    add_source_node(g, 0)
    add_sink_node(g, 1)
    g.graph["source_node"] = 0
    g.graph["sink_node"] = 1
    return g


def main() -> None:
    path, stages, mbs, unit, blocking = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    started = time.perf_counter()
    op_specs = specs(path, unit, blocking)
    fitted = time.perf_counter()
    g = dag(stages, mbs, op_specs)
    plans = [(r.quant_time, r.cost) for r in PhillipsDessouky(g).run()]
    done = time.perf_counter()
    print(json.dumps({"plans": plans, "fit_s": fitted - started, "solve_s": done - fitted, "total_s": done - started}))


if __name__ == "__main__":
    main()
