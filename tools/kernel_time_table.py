#!/usr/bin/env python3
"""Where one prefill's GPU time goes, from Nsight Compute's per-kernel durations.

Input: the output of `ncu --metrics gpu__time_duration.sum --csv --print-units base <aerie-bench
one-batch ... --cuda-graph off>` (tools/gpu_prefill_check.sh profile); the program's own lines
are skipped. The bench runs the same prefill several times (the runs are told apart by counting
`--layers` marker kernels each); the kernels from the first prefill attention of the
second-to-last run up to the first of the last run are exactly one prefill
(its layers' tails, the LM head and sampling, then the next run's embedding and first layer's
head), so they are summed: per kernel (name without template arguments), count, microseconds,
share, and the share of GEMMs, attention and the rest.
"""
import argparse
import csv
import re
import sys


def short_name(name):
    full = name
    name = name.replace("(anonymous namespace)::", "")
    depth, out = 0, []
    for ch in name:  # template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = re.sub(r"\(.*$", "", "".join(out)).strip()  # arguments
    name = re.sub(r"^void ", "", name)
    short = name.split("::")[-1]
    if short in ("Kernel", "Kernel2", "device_kernel"):  # cutlass wrappers: the kernel is the template argument
        inner = re.search(r"<([^<>,(]+)", full)
        short = inner.group(1).split("::")[-1] if inner else short
    return short


def read_kernels(path):
    """Every kernel of an `ncu --csv --print-units base` output in launch order: a dict of its
    name ("name") and each metric ncu reported for it, by metric name (rows of the program's own
    output, which do not start with a quote, are skipped)."""
    lines = [l for l in open(path, errors="replace") if l.startswith('"')]
    kernels = {}
    for row in csv.DictReader(lines):
        k = kernels.setdefault(int(row["ID"]), {"name": row["Kernel Name"]})
        k[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    return [kernels[i] for i in sorted(kernels)]


def kind(name):
    low = name.lower()
    if "attention" in low:
        return "attention"
    if any(k in low for k in ("gemm", "gemv", "xmma", "cutlass", "sm90_", "sm80_", "nvjet")):
        return "matmul"
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv_file")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--marker", default="prefill_attention_kernel", help="a kernel each layer of a prefill runs once")
    args = ap.parse_args()
    kernels = [(i, k["name"], k["gpu__time_duration.sum"]) for i, k in enumerate(read_kernels(args.csv_file))]  # launch order
    marks = [i for i, (_, n, _) in enumerate(kernels) if args.marker in n]
    if len(marks) < 2 * args.layers:
        sys.exit(f"{args.csv_file}: {len(marks)} '{args.marker}' kernels, fewer than two prefills of {args.layers} layers")
    runs = [marks[r * args.layers] for r in range(len(marks) // args.layers)]
    lo, hi = runs[-2], runs[-1]
    window = kernels[lo:hi]
    total = sum(ns for _, _, ns in window)
    by_name, by_kind = {}, {}
    for _, n, ns in window:
        s = short_name(n)
        c, t = by_name.get(s, (0, 0.0))
        by_name[s] = (c + 1, t + ns)
        by_kind[kind(s)] = by_kind.get(kind(s), 0.0) + ns
    print(f"one prefill: {len(window)} kernels, {total / 1e6:.2f} ms of kernel time (ncu serialises kernels: launch gaps excluded)")
    print(f"{'kernel':<60} {'count':>5} {'us':>10} {'share':>7}")
    for s, (c, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"{s[:60]:<60} {c:>5} {t / 1e3:>10.1f} {100 * t / total:>6.1f}%")
    print("by kind: " + ", ".join(f"{k} {t / 1e6:.2f} ms ({100 * t / total:.1f}%)" for k, t in sorted(by_kind.items(), key=lambda kv: -kv[1])))
    # One middle layer in launch order (from its attention to the next layer's): which product is
    # which GEMM kernel, and what each op of a layer costs.
    mid = marks[len(marks) - args.layers - args.layers // 2]
    nxt = marks[len(marks) - args.layers - args.layers // 2 + 1]
    print("one layer, from its attention on:")
    for _, n, ns in kernels[mid:nxt]:
        print(f"  {short_name(n)[:70]:<70} {ns / 1e3:>9.1f} us")


if __name__ == "__main__":
    main()
