"""``benchmarks/upstream_examples.py``'s parts that run in seconds: the CUDA stand-in and the data it writes.

(The examples themselves take a minute each: they are the benchmark, not a test.)
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys

from benchmark_scripts import BENCHMARKS as BENCH
from benchmark_scripts import load_benchmark

STANDIN = BENCH / "upstream" / "cuda_standin"
upstream_examples = load_benchmark("upstream_examples")

# what upstream's examples do with CUDA, on one process group of one rank over loopback
SCRIPT = """
import socket, torch, torch.distributed as dist, torch.nn as nn
torch.cuda.set_device(0)
model = nn.Linear(4, 2).cuda(0)
x = torch.randn(3, 4).cuda(0, non_blocking=True)
counts = torch.tensor([1.0, 2.0], device="cuda")
moved = torch.zeros(2).to(1)
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
dist.init_process_group(backend="nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0], output_device=0)
ddp(x).sum().backward()
dist.all_reduce(counts)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record(); end.record()
print(dist.get_backend(), x.device, counts.device, moved.device, model.weight.grad is not None, end.elapsed_time(start) <= 0)
dist.destroy_process_group()
"""


def test_the_stand_in_places_the_examples_cuda_work_on_the_cpu():
    """(Without it the script fails at once here: torch is a CPU build, and NCCL needs GPUs.)"""
    env = dict(os.environ, PYTHONPATH=str(STANDIN), OMP_NUM_THREADS="1")
    env.pop("ZEUS_CUDA_STANDIN", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["gloo", "cpu", "cpu", "cpu", "True", "True"]


def test_the_datasets_are_written_in_their_on_disk_formats(tmp_path):
    upstream_examples.image_folder(tmp_path / "train", classes=3, per_class=2, seed=0)
    images = sorted((tmp_path / "train").rglob("*.ppm"))
    assert [p.parent.name for p in images] == ["n00000000"] * 2 + ["n00000001"] * 2 + ["n00000002"] * 2
    assert all(p.read_bytes().startswith(b"P6 32 32 255\n") and len(p.read_bytes()) == 13 + 32 * 32 * 3 for p in images)
    raw = tmp_path / "FashionMNIST" / "raw"
    upstream_examples.idx_files(raw, train=5, test=2, seed=0)
    images = (raw / "train-images-idx3-ubyte").read_bytes()
    labels = (raw / "t10k-labels-idx1-ubyte").read_bytes()
    assert struct.unpack(">IIII", images[:16]) == (2051, 5, 28, 28) and len(images) == 16 + 5 * 28 * 28
    assert struct.unpack(">II", labels[:8]) == (2049, 2) and all(b < 10 for b in labels[8:])
