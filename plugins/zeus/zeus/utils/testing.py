"""Upstream's test helper ``ReplayZeusMonitor``: a ``ZeusMonitor`` that replays the windows of a log file.

The log is what :class:`zeus.monitor.ZeusMonitor` writes with ``log_file=``
(``start_time,window_name,elapsed_time,gpu0_energy,...``). Each ``end_window`` reads the next
row, in the order windows ended; nothing is read from any GPU.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from zeus.monitor.energy import Measurement, ZeusMonitor
from zeus.utils.framework import sync_execution as _sync_execution

logger = logging.getLogger(__name__)


class ReplayZeusMonitor(ZeusMonitor):
    """Replay the windows of ``log_file`` (required) as :class:`Measurement` objects.

    ``gpu_indices``: the GPUs of the log's columns (None: read from its header).
    ``ignore_sync_execution``: never wait for the framework. ``match_window_name``: a window
    whose name is not the next row's is a ``RuntimeError``. Ending a window that is not open,
    or beginning one that is (without ``restart``), is a ``RuntimeError``, as upstream.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        approx_instant_energy: bool = False,
        log_file: str | Path | None = None,
        ignore_sync_execution: bool = False,
        match_window_name: bool = True,
    ) -> None:
        if log_file is None:
            raise ValueError("`log_file` cannot be `None` for `ReplayZeusMonitor`.")
        self.approx_instant_energy = approx_instant_energy
        self.ignore_sync_execution = ignore_sync_execution
        self.match_window_name = match_window_name
        self.sync_with: Any = "torch"
        self.log_file: Any = open(log_file)  # noqa: SIM115 - read row by row, closed by close()
        header = self.log_file.readline().strip()
        if gpu_indices is None:
            gpu_indices = [int(column.split("_")[0][len("gpu") :]) for column in header.split(",")[3:] if column]
        self.gpu_indices = list(gpu_indices)
        self.nvml_gpu_indices = self.gpu_indices
        self.cpu_indices: list[int] = []
        self.power_monitor = None
        self.ongoing_windows: list[str] = []
        logger.info("Replaying from '%s' with GPU indices %s", log_file, self.gpu_indices)

    def _sync(self) -> None:
        if not self.ignore_sync_execution:
            _sync_execution(self.gpu_indices)

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Open window ``key`` (nothing is read)."""
        if key in self.ongoing_windows:
            if not restart:
                raise RuntimeError(f"Window {key} is already ongoing.")
            self.ongoing_windows.remove(key)
        self.ongoing_windows.append(key)
        if sync_execution:
            self._sync()
        logger.info("Measurement window '%s' started.", key)

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """The next row of the log as window ``key``'s measurement (``cancel``: zeros, no row read)."""
        if key not in self.ongoing_windows:
            raise RuntimeError(f"Window {key} is not ongoing.")
        self.ongoing_windows.remove(key)
        if sync_execution:
            self._sync()
        if cancel:
            logger.info("Measurement window '%s' cancelled.", key)
            return Measurement(time=0.0, gpu_energy=dict.fromkeys(self.gpu_indices, 0.0))
        line = self.log_file.readline()
        if not line:
            raise RuntimeError("No more lines in the log file.")
        _, name, *numbers = line.rstrip("\n").split(",")
        if self.match_window_name and name != key:
            raise RuntimeError(f"Was expecting {name}, not {key}.")
        if len(numbers) != len(self.gpu_indices) + 1:
            raise RuntimeError(f"Line has unexpected number of energy measurements: {line}")
        elapsed, *joules = map(float, numbers)
        measurement = Measurement(time=elapsed, gpu_energy=dict(zip(self.gpu_indices, joules)))
        logger.info("Measurement window '%s' ended (%s).", key, measurement)
        return measurement

    def reset_windows(self) -> None:
        """Drop every open window."""
        self.ongoing_windows.clear()

    def close(self) -> None:
        """Close the log file."""
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None


__all__ = ["ReplayZeusMonitor"]
