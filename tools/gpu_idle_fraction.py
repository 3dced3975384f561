#!/usr/bin/env python3
"""Issue #15, item 1: how much of a served workload's wall time the GPU is idle between forwards.

Starts aerie-serve (Llama-3.1-8B shape unless --model-shape says another, dummy weights, bf16, CUDA graphs on), plain and with an
EAGLE3 head, each with overlap scheduling on and off (random weights: one token per round, so this shows cost, not speed-up), runs
`aerie-bench serving` (random ids) at 1, 32 and 256 concurrent streams, and meanwhile samples the
GPU's utilization with nvidia-smi every 100 ms (NVML: the share of each sample period in which a
kernel ran). The idle fraction of a run is 1 - the mean utilization over it. Coarse (NVML's sample
period is 1/6 s to 1 s, and it counts the launch gaps between the kernels of a forward as idle),
but measured from outside. The engine's own measure, the device idle *between* forwards, comes
from /metrics before and after each run: aerie:forward_gap_seconds / (that + aerie:forward_seconds),
timed with CUDA events on the worker's stream (core::ForwardTimeline).

  gpu_idle_fraction.py --serve BIN/aerie-serve --bench BIN/aerie-bench --json OUT.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "launch"))
from serve_process import running_server  # noqa: E402

SERVE = ["--load-format", "dummy", "--device", "cuda", "--dtype", "bf16", "--max-running-requests", "256"]
# Overlap scheduling on (the default), and "-sync": --disable-overlap-schedule, one batch in flight.
EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]
MODES = {"plain": [], "plain-sync": ["--disable-overlap-schedule"], "EAGLE3": EAGLE3 + ["--enable-spec-overlap"], "EAGLE3-sync": EAGLE3}


def engine_times(url):
    """(forward seconds, gap seconds) so far, from the server's /metrics."""
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    values = {}
    for line in text.splitlines():
        parts = line.split()
        name = parts[0].split("{")[0] if parts else ""
        if len(parts) == 2 and name in ("aerie:forward_seconds", "aerie:forward_gap_seconds"):
            values[name] = float(parts[1])
    return values.get("aerie:forward_seconds", 0.0), values.get("aerie:forward_gap_seconds", 0.0)


def run(bench, url, concurrency, input_len, output_len):
    prompts = max(16, 4 * concurrency)
    busy0, gap0 = engine_times(url)
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        sampler = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100"],
                                   stdout=subprocess.PIPE, text=True)
        try:
            subprocess.run([bench, "serving", "--base-url", url, "--disable-progress", "--num-prompts", str(prompts),
                            "--max-concurrency", str(concurrency), "--random-input-len", str(input_len),
                            "--random-output-len", str(output_len), "--output-file", result.name],
                           check=True, stdout=subprocess.DEVNULL)
        finally:
            sampler.terminate()
            out, _ = sampler.communicate(timeout=10)
        stats = json.load(open(result.name))
    busy1, gap1 = engine_times(url)
    busy, gap = busy1 - busy0, gap1 - gap0
    util = [float(x) for x in out.split() if x.strip().replace(".", "", 1).isdigit()]
    # The first samples can predate the run's first request: drop leading zeros.
    while util and util[0] == 0.0:
        util.pop(0)
    mean = sum(util) / len(util) if util else 0.0
    return {"concurrency": concurrency, "prompts": prompts, "samples": len(util), "gpu_utilization_mean": mean,
            "idle_fraction": 1.0 - mean / 100.0, "forward_seconds": busy, "gap_seconds": gap,
            "idle_between_forwards": gap / (busy + gap) if busy + gap > 0 else None, "output_throughput": stats.get("output_throughput"),
            "median_itl_ms": stats.get("median_itl_ms"), "mean_itl_ms": stats.get("mean_itl_ms"), "median_ttft_ms": stats.get("median_ttft_ms")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32, 256])
    ap.add_argument("--modes", nargs="+", default=list(MODES))
    ap.add_argument("--model-shape", default="llama-3.1-8b", help="aerie-serve's --model-shape (dummy weights)")
    args = ap.parse_args()
    rows = []
    for mode in args.modes:
        extra = MODES[mode]
        log = os.path.join(os.path.dirname(os.path.abspath(args.json)), f"serve_{mode}.log")  # the server's stderr
        with open(log, "w") as err, running_server(args.serve, SERVE + ["--model-shape", args.model_shape] + extra, startup_s=600, stderr=err) as (url, _):
            for c in args.concurrency:
                r = run(args.bench, url, c, args.input_len, args.output_len)
                r["mode"] = mode
                r["model_shape"] = args.model_shape
                rows.append(r)
                between = r["idle_between_forwards"]
                print(f"{mode:10s} {c:4d} streams: idle between forwards {100 * (between or 0):5.2f}% "
                      f"({r['gap_seconds']:.3f} of {r['gap_seconds'] + r['forward_seconds']:.2f} s), "
                      f"NVML busy {r['gpu_utilization_mean']:5.1f}% (idle {100 * r['idle_fraction']:5.1f}%), "
                      f"{r['output_throughput']:.0f} tok/s, median ITL {r['median_itl_ms']:.2f} ms ({r['samples']} samples)", flush=True)
                with open(args.json, "w") as f:  # after every row: a run cut short keeps what it measured
                    json.dump({"input_len": args.input_len, "output_len": args.output_len, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
