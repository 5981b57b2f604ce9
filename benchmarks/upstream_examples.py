"""Upstream Zeus's examples, unchanged, against ``zeus-compat`` on the simulated NVIDIA driver: ran / failed.

    python benchmarks/upstream_examples.py [--python PY] [--only NAME ...] [--release 0.16.0] [--sdist PATH] [--keep]

The example files are read at run time from the release's sdist (as ``upstream_tests.py``
does; nothing of upstream is committed) and run byte for byte, each in its own folder:

* the GPUs are zeus's simulated NVIDIA driver (``zeus_plugins_nvml.fake_pynvml``): 2 A100s
  whose power limits range 350-400 W and whose draw the limit caps, so the power-limit
  optimizer profiles 3 limits (25 W apart) and picks one;
* CUDA device placement is stood in for by ``benchmarks/upstream/cuda_standin`` (a
  ``sitecustomize`` on the examples' ``PYTHONPATH``; its docstring says what it does): the
  examples' ``torch.cuda.set_device`` / ``.cuda()`` / ``nccl`` run on the CPU;
* data that the examples download is small random data in the dataset's own on-disk format,
  written here: an ``ImageFolder`` tree of 32x32 PPM images (the ImageNet examples), the
  FashionMNIST/MNIST IDX files (the MNIST examples), a text file and a one-layer GPT-2
  configuration with a byte-level vocabulary (the Hugging Face example);
* the batch-size examples' server is ``zeus serve`` on loopback (it answers upstream's REST
  protocol); the distributed examples run under ``torchrun`` with 2 processes (the FSDP one under
  ``torch.distributed.launch``, which passes the ``--local-rank`` it reads).

The examples need torchvision, tensorboardX and (Hugging Face) transformers 4 with datasets,
evaluate and accelerate; ``--python`` names the interpreter of an environment that has them
next to zeus-core, zeus-plugins-nvml and zeus-compat (the README of zeus-compat says how to
make one). An example whose packages are missing there is reported as not run, with what is
missing. Exit status: 1 if any example that could run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "upstream" / "cuda_standin"
sys.path.insert(0, str(HERE.parent / "tests" / "_support"))  # the plan server harness (serve_helpers)

from benchmark_scripts import load_benchmark  # noqa: E402

upstream_tests = load_benchmark("upstream_tests")

#: what each example needs in the examples' environment, besides torch and zeus-compat
NEEDS = {
    "train_single": ("torchvision",),
    "train_dp": ("torchvision",),
    "train_fsdp": ("torchvision",),
    "mnist_single": ("torchvision", "tensorboardX"),
    "mnist_dp": ("torchvision", "tensorboardX"),
    "run_clm": ("transformers", "datasets", "evaluate", "accelerate"),
}
LIMITS_W = (350.0, 400.0)


# ============================================================================ data


def image_folder(root: Path, classes: int, per_class: int, seed: int) -> None:
    """An ``ImageFolder`` tree (``root/<class>/<n>.ppm``) of random 32x32 RGB images."""
    rng = random.Random(seed)
    for c in range(classes):
        folder = root / f"n{c:08d}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            (folder / f"{i}.ppm").write_bytes(b"P6 32 32 255\n" + rng.randbytes(32 * 32 * 3))


def idx_files(raw: Path, train: int, test: int, seed: int) -> None:
    """The four IDX files of an MNIST-format dataset (28x28 images, labels 0-9), uncompressed, as downloaded."""
    rng = random.Random(seed)
    raw.mkdir(parents=True)
    for prefix, n in (("train", train), ("t10k", test)):
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 2051, n, 28, 28) + rng.randbytes(n * 28 * 28))
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, n) + bytes(rng.randrange(10) for _ in range(n)))


def _byte_symbols() -> list[str]:
    """The 256 printable symbols a byte-level BPE vocabulary (GPT-2's) gives the bytes, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1), *range(ord("\u00ae"), ord("\u00ff") + 1)]
    extra = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(extra)) for b in range(256)]


def tiny_gpt2(folder: Path, text: Path) -> None:
    """A one-layer GPT-2 configuration and tokenizer (byte-level vocabulary, no merges) and random words."""
    folder.mkdir(parents=True)
    vocab = {c: i for i, c in enumerate(_byte_symbols())}
    vocab["<|endoftext|>"] = end = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "gpt2",
                "vocab_size": end + 1,
                "n_positions": 64,
                "n_embd": 32,
                "n_layer": 1,
                "n_head": 2,
                "bos_token_id": end,
                "eos_token_id": end,
            }
        )
    )
    rng = random.Random(0)
    words = ["energy", "power", "limit", "epoch", "batch", "time", "cost", "watt"]
    text.write_text("\n".join(" ".join(rng.choice(words) for _ in range(20)) for _ in range(120)))


# ============================================================================ runs


class Example:
    """One example's run: its folder, environment, and the simulated driver's state file."""

    def __init__(self, name: str, work: Path, python: str) -> None:
        from zeus_plugins_nvml import fake_pynvml

        self.name = name
        self.dir = work / name / "run"
        self.dir.mkdir(parents=True)
        self.python = python
        self.driver = fake_pynvml.create(
            self.dir.parent / "nvml.json",
            [
                fake_pynvml.FakeGpu(min_limit_w=LIMITS_W[0], max_limit_w=LIMITS_W[1], default_limit_w=LIMITS_W[1], demand_w=450.0)
                for _ in range(2)
            ],
            privileged=True,
        )
        self.env = dict(
            os.environ,
            ZEUS_FAKE_NVML=str(self.driver),
            ZEUS_STATE_DIR=str(self.dir.parent / "state"),
            ZEUS_GPU_DEVICE="nvml",
            ZEUS_LOG_LEVEL="info",
            PYTHONPATH=str(STANDIN),
            HF_HUB_OFFLINE="1",
            HF_DATASETS_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            OMP_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
        )
        for key in ("CUDA_VISIBLE_DEVICES", "ZEUS_SERVER_URL", "ZEUS_JOB_ID"):
            self.env.pop(key, None)

    def limits(self) -> list[float] | None:
        try:
            return [g["limit_w"] for g in json.loads(self.driver.read_text())["gpus"]]
        except (OSError, ValueError, KeyError):  # being written
            return None

    def watch(self, stop: threading.Event, seen: list[list[float]]) -> None:
        """The GPUs' power limits each time they change (what the optimizer did, seen from the driver)."""
        while not stop.wait(0.05):
            now = self.limits()
            if now is not None and (not seen or now != seen[-1]):
                seen.append(now)

    def run(self, cmd: list[str], timeout: float) -> tuple[str, str]:
        started = time.monotonic()
        seen: list[list[float]] = []
        stop = threading.Event()
        watcher = threading.Thread(target=self.watch, args=(stop, seen), daemon=True)
        watcher.start()
        try:
            done = subprocess.run(cmd, cwd=self.dir, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "failed", f"did not finish in {timeout:.0f} s"
        finally:
            stop.set()
            watcher.join()
        took = time.monotonic() - started
        (self.dir.parent / "output.log").write_text(done.stdout + "\n" + done.stderr)
        if done.returncode != 0:
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()] or ["no output"]
            return "failed", f"exit {done.returncode}: {lines[-1][:300]}"
        path = " -> ".join("/".join(f"{w:g}" for w in limits) for limits in seen)
        return "ran", f"{took:.0f} s; the GPUs' power limits (W, per GPU) went {path or 'unchanged'}"


def missing(python: str, modules: tuple[str, ...]) -> list[str]:
    code = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    out = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else ["(the interpreter did not start)"]


def torchrun(python: str, launcher: str = "torch.distributed.run") -> list[str]:
    """Two processes of ``python``; ``torch.distributed.launch`` also passes each its ``--local-rank``."""
    return [python, "-m", launcher, "--standalone", "--nproc_per_node", "2"]


def run_example(name: str, examples: Path, work: Path, python: str) -> tuple[str, str]:
    gone = missing(python, NEEDS[name])
    if gone:
        return "not run", f"{', '.join(gone)} not installed for {python}"
    ex = Example(name, work, python)
    plo = examples / "power_limit_optimizer"
    if name in ("train_single", "train_dp"):
        for seed, (split, n) in enumerate((("train", 48), ("val", 4))):
            image_folder(ex.dir.parent / "imagenet" / split, classes=5, per_class=n, seed=seed)
        args = [str(ex.dir.parent / "imagenet"), "-a", "shufflenet_v2_x0_5", "-j", "0", "-p", "50"]
        # 150 steps profile the 3 limits (10 warm-up and 40 measured steps each); an epoch is 120 steps on one GPU,
        # 60 per rank on two
        if name == "train_single":
            return ex.run([python, str(plo / "train_single.py"), *args, "--epochs", "2", "-b", "2", "--gpu", "0"], timeout=900)
        return ex.run([*torchrun(python), str(plo / "train_dp.py"), *args, "--epochs", "3", "-b", "4"], timeout=900)
    if name == "train_fsdp":
        idx_files(ex.dir / "data" / "MNIST" / "raw", train=640, test=128, seed=3)
        # the FSDP example takes its GPU from --local-rank (default 0), which torchrun does not pass
        return ex.run(
            [
                *torchrun(python, "torch.distributed.launch"),
                str(plo / "train_fsdp.py"),
                "--epochs",
                "2",
                "--batch-size",
                "1",
                "--test-batch-size",
                "64",
            ],
            timeout=900,
        )
    if name in ("mnist_single", "mnist_dp"):
        from serve_helpers import Serve

        idx_files(ex.dir.parent / "data" / "FashionMNIST" / "raw", train=1024, test=128, seed=4)
        mnist = examples / "batch_size_optimizer" / "mnist"
        with Serve(store=str(ex.dir.parent / "jobs")) as serve:
            # two runs of one job (ZEUS_JOB_ID): the second is the job's next trial, at the batch size zeus serve picks
            ex.env.update(ZEUS_SERVER_URL=serve.url, ZEUS_JOB_ID=f"mnist-dev-{name}")
            args = ["--epochs", "2", "--target-accuracy", "0.05", "--test-batch-size", "128", "--dir", "logs"]
            script = mnist / ("train_single_gpu.py" if name == "mnist_single" else "train_dp.py")
            cmd = [python, str(script)] if name == "mnist_single" else [*torchrun(python), str(script)]
            runs = [ex.run([*cmd, *args], timeout=900) for _ in range(2)]
            failed = [r for r in runs if r[0] != "ran"]
            if failed:
                return failed[0]
            import httpx

            tries = httpx.get(f"{serve.url}/v1/jobs/mnist-dev-{name}/history", timeout=30).json()["tries"]
            sizes = [f"{t['batch_size']} ({'reached' if t['reached'] else 'not reached'})" for t in tries]
            return "ran", f"2 runs, {runs[0][1].split(';')[0]} and {runs[1][1].split(';')[0]}; zeus serve's trials: {', '.join(sizes)}"
    if name == "run_clm":
        version = subprocess.run(
            [python, "-c", "import transformers; print(transformers.__version__)"], capture_output=True, text=True
        ).stdout.strip()
        if int(version.split(".")[0] or 0) >= 5:
            return "not run", f"it needs transformers 4 (it imports is_torch_tpu_available); {python} has {version}"
        tiny_gpt2(ex.dir.parent / "tiny-gpt2", ex.dir.parent / "train.txt")
        model = str(ex.dir.parent / "tiny-gpt2")
        return ex.run(
            [
                python,
                str(examples / "huggingface" / "run_clm.py"),
                "--config_name",
                model,
                "--tokenizer_name",
                model,
                "--train_file",
                str(ex.dir.parent / "train.txt"),
                "--do_train",
                "--per_device_train_batch_size",
                "4",
                "--num_train_epochs",
                "2",
                "--block_size",
                "32",
                "--output_dir",
                str(ex.dir / "out"),
                "--report_to",
                "none",
                "--use_cpu",
            ],
            timeout=900,
        )
    raise ValueError(name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the examples' interpreter (default: this one)")
    ap.add_argument("--only", nargs="+", choices=list(NEEDS), help="run only these examples")
    ap.add_argument("--release", default="0.16.0")
    ap.add_argument("--sdist", type=Path, help="the release's sdist (default: download it into the cache)")
    ap.add_argument("--keep", action="store_true", help="keep the examples' folders and outputs (the folder is printed)")
    args = ap.parse_args(argv)
    sdist = args.sdist or upstream_tests.fetch_sdist(args.release)
    if not sdist.is_file():
        print(f"--sdist {sdist}: no such file", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="zeus-upstream-examples-"))
    try:
        with tarfile.open(sdist) as tar:
            tar.extractall(work / "sdist", members=[m for m in tar.getmembers() if "/examples/" in m.name], filter="data")
        [root] = list((work / "sdist").iterdir())
        print(f"upstream zeus {args.release} examples from {sdist.name}, run with {args.python}")
        results = {}
        for name in args.only or NEEDS:
            results[name] = run_example(name, root / "examples", work, args.python)
            print(f"  {results[name][0]:8s} {name}: {results[name][1]}", flush=True)
        counts = {s: sum(1 for r in results.values() if r[0] == s) for s in ("ran", "failed", "not run")}
        print(f"ran {counts['ran']}, failed {counts['failed']}, not run {counts['not run']}")
        if args.keep:
            print(f"kept in {work}")
        return 1 if counts["failed"] else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
