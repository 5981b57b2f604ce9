"""What goes wrong while exporting is a warning of the ``zeus.prometheus`` logger (so ``-q`` hides it), once."""

from __future__ import annotations

import logging
import socket

from zeus_plugins_prometheus.exporter import Exporter
from zeus_plugins_prometheus.plugin import ExporterConfig


def test_a_taken_port_and_a_silent_pushgateway_are_warnings_of_the_zeus_logger(caplog, capsys):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    gateway = f"http://user:hunter2@127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing answers there
    try:
        with caplog.at_level(logging.WARNING, logger="zeus"):
            exporter = Exporter(ExporterConfig(host="127.0.0.1", port=taken.getsockname()[1], pushgateway=gateway), "job")
            exporter.push()
            exporter.push()
    finally:
        taken.close()
    got = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert [g[:2] for g in got] == [("zeus.prometheus", "WARNING")] * 2, got
    assert "cannot serve /metrics on 127.0.0.1" in got[0][2]
    assert "cannot push to http://user:***@127.0.0.1" in got[1][2] and "hunter2" not in caplog.text
    out = capsys.readouterr()
    assert out.out == out.err == ""  # nothing printed past the logging configuration
