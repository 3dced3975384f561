#!/usr/bin/env python3
"""Starts aerie-serve (under a launcher such as mpirun), waits for /health, runs
`aerie-bench serving` against it, stops the server and keeps its stderr (the per-rank
debug logs of DP attention go there). Used by tools/gpu_dpa_check.sh.

  serve_and_bench.py --serve BIN/aerie-serve --bench BIN/aerie-bench --stderr FILE
      [--launcher "mpirun -np 2 ..."] --serve-args "..." --bench-args "..."
"""
import argparse
import os
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "launch"))
from serve_process import running_server  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--launcher", default="")
    ap.add_argument("--serve-args", default="")
    ap.add_argument("--bench-args", default="")
    ap.add_argument("--stderr", required=True, help="where the server's stderr goes")
    ap.add_argument("--startup-s", type=float, default=300)
    args = ap.parse_args()
    with open(args.stderr, "w") as err:
        with running_server(args.serve, shlex.split(args.serve_args), startup_s=args.startup_s, launcher=shlex.split(args.launcher),
                            stderr=err) as (url, _):
            rc = subprocess.run([args.bench, "serving", "--base-url", url, "--disable-progress", *shlex.split(args.bench_args)]).returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())
