#!/usr/bin/env python3
"""The last kernels of a program in launch order, from Nsight Compute's per-kernel metrics.

Input: the output of `ncu --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size
--csv --print-units base <program>` (tools/gpu_step_profile.sh); the program's own lines are
skipped. Prints the last --last kernels, one a line: launch index, duration in microseconds, grid
and block size, the kernel's name without template arguments; then the sum of their durations
(what the GPU spent computing in that window, with no gap between kernels: a step that takes longer
than the sum spends the rest between kernels). Used to take one decode step or one speculative
round apart (which kernels, how long each) where a graph replays them.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_time_table import read_kernels, short_name  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv_file")
    ap.add_argument("--last", type=int, default=400)
    args = ap.parse_args()
    kernels = read_kernels(args.csv_file)
    tail = kernels[-args.last:]
    first = len(kernels) - len(tail)
    total = 0.0
    for i, k in enumerate(tail):
        us = k.get("gpu__time_duration.sum", 0.0) / 1e3
        total += us
        print(f"{first + i:6d} {us:9.2f} {int(k.get('launch__grid_size', 0)):7d} {int(k.get('launch__block_size', 0)):5d}  {short_name(k['name'])}")
    print(f"{len(tail)} kernels of {len(kernels)}: {total:.1f} us of kernel time")


if __name__ == "__main__":
    main()
