"""`zeus traces synth` writes a readable trace pair; `zeus traces fetch` downloads and checks one."""

from __future__ import annotations

import functools
import http.server
import math
import threading

import numpy as np
import pytest
from click.testing import CliRunner

from zeus_plugins_trace.commands import traces_group
from zeus_plugins_trace.traces import load_traces, read_power, read_train, select


def test_synth_writes_the_published_format_with_the_model_properties(tmp_path):
    res = CliRunner().invoke(traces_group, ["synth", "--out", str(tmp_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    header = (tmp_path / "summary_train.csv").read_text().splitlines()[0]
    assert header == "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch"
    traces = load_traces(tmp_path, "v100")
    assert traces.synthetic and traces.model["seed"] == 0
    wt = select(traces, "cifar100", "shufflenetv2", "adadelta", 0.6)
    mean = [np.nanmean(p) for p in wt.paths]
    top = list(wt.batch_sizes).index(128)  # the sweet spot: epochs grow above it
    assert all(a < b for a, b in zip(mean[top:], mean[top + 1 :]))
    assert any(math.isnan(x) for x in wt.paths[-1])  # 4096 needs too many epochs
    assert np.all(np.diff(wt.power[:, ::-1], axis=1) >= 0)  # power rises with the limit
    assert np.all(np.diff(wt.time[:, ::-1], axis=1) <= 0)  # and time falls
    assert np.all(np.diff(wt.time[:, 0]) < 0)  # throughput grows with batch size
    for gpu in ("a40", "p100", "rtx6000"):
        assert load_traces(tmp_path, gpu).gpu == gpu


@pytest.fixture
def server(shared_data):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(shared_data / "zeus_nsdi23"))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_fetch_from_a_loopback_server(server, tmp_path, shared_data):
    out = tmp_path / "traces"
    res = CliRunner().invoke(traces_group, ["fetch", "--out", str(out), "--base-url", server], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    for name in (
        "summary_train.csv",
        "summary_power_v100.csv",
        "summary_power_a40.csv",
        "summary_power_p100.csv",
        "summary_power_rtx6000.csv",
    ):
        assert (out / name).read_bytes() == (shared_data / "zeus_nsdi23" / name).read_bytes()
    assert len(read_train(out / "summary_train.csv")) == 3759 and read_power(out / "summary_power_p100.csv")


def test_fetch_failure_leaves_no_partial_file(server, tmp_path):
    out = tmp_path / "traces"
    res = CliRunner().invoke(traces_group, ["fetch", "--out", str(out), "--base-url", server + "/nothing-here"])
    assert res.exit_code != 0 and "cannot download" in res.output and "404" in res.output
    assert list(out.iterdir()) == []
