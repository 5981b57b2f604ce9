"""Bad traces are rejected with the file, line and column named; good ones are read in order."""

from __future__ import annotations

import math

import pytest

from zeus_plugins_trace.traces import TraceError, load_traces, read_power, read_train, select

TRAIN_HEADER = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
POWER_HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"


def write(path, text):
    path.write_text(text)
    return path


def test_missing_column_names_file_line_and_column(tmp_path):
    p = write(tmp_path / "summary_power_v100.csv", "dataset,network,batch_size,optimizer,power_limit,time_per_epoch\nc,n,8,sgd,100,1.0\n")
    with pytest.raises(TraceError, match=r"summary_power_v100.csv:1: missing column 'average_power'"):
        read_power(p)


def test_nan_in_power_trace_names_line_and_column(tmp_path):
    p = write(tmp_path / "summary_power_v100.csv", POWER_HEADER + "c,n,8,sgd,100,1.0,90\nc,n,8,sgd,150,nan,120\n")
    with pytest.raises(TraceError, match=r"summary_power_v100.csv:3: column 'time_per_epoch' is NaN"):
        read_power(p)


def test_empty_and_non_numeric_cells(tmp_path):
    p = write(tmp_path / "summary_train.csv", TRAIN_HEADER + "c,n,8,sgd,0.1,1,,3\n")
    with pytest.raises(TraceError, match=r":2: column 'target_metric' is empty"):
        read_train(p)
    p = write(tmp_path / "summary_train.csv", TRAIN_HEADER + "c,n,eight,sgd,0.1,1,0.5,3\n")
    with pytest.raises(TraceError, match=r":2: column 'batch_size': 'eight' is not a number"):
        read_train(p)


def test_nan_target_epoch_means_never_reached(tmp_path):
    p = write(tmp_path / "summary_train.csv", TRAIN_HEADER + "c,n,8,SGD,0.1,1,0.5,nan\nc,n,8,sgd,0.1,2,0.5,4\n")
    rows = read_train(p)
    assert math.isnan(rows[0].target_epoch) and rows[1].target_epoch == 4
    assert rows[0].optimizer == "sgd"  # case-insensitive, as the public traces mix cases


def test_unknown_gpu_lists_the_gpus_the_folder_has(tmp_path):
    write(tmp_path / "summary_train.csv", TRAIN_HEADER + "c,n,8,sgd,0.1,1,0.5,3\n")
    write(tmp_path / "summary_power_a40.csv", POWER_HEADER + "c,n,8,sgd,100,1.0,90\n")
    with pytest.raises(TraceError, match=r"summary_power_h100.csv: unknown GPU 'h100'.*has power traces for a40"):
        load_traces(tmp_path, "h100")


def test_unknown_target_lists_targets(shared_data):
    traces = load_traces(shared_data / "zeus_nsdi23", "v100")
    with pytest.raises(TraceError, match=r"targets are 0\.05, 0\.1"):
        select(traces, "cifar100", "shufflenetv2", "adadelta", 0.61)


def test_public_trace_arrays_match_the_published_sets(shared_data):
    traces = load_traces(shared_data / "zeus_nsdi23", "v100")
    wt = select(traces, "cifar100", "shufflenetv2", "adadelta", 0.6)
    assert list(wt.batch_sizes) == [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert list(wt.power_limits) == [250, 225, 200, 175, 150, 125, 100]
    assert wt.max_power_w == 250 and wt.recurrences_default() == 140
    assert not wt.synthetic
