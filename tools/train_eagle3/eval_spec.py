#!/usr/bin/env python3
"""Speculative decoding with a trained EAGLE-3 head (or a STANDALONE draft) against plain decoding, on held-out prompts
(prompts.py's held-out topics), through `aerie-generate --chat`: for each batch size
(--max-running-requests), temperature (0 and 0.7, seeded) and configuration (plain; EAGLE3
chain 3 and 5 steps; tree topk 4 with 8 draft tokens; with --configs also chain 2 and larger trees), the output tokens per second of prefill
+ decode (aerie-generate's summary line; loading excluded) and the accept length (output tokens
per verify forward). In f32 greedy outputs must equal plain decoding's, token for token (a
difference fails the run); in bf16 how many equal is reported (near-ties may flip).

  eval_spec.py --generate BIN --model smollm2.gguf --head DIR [--device cuda --dtype bf16] --json OUT
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prompts as prompt_sets  # noqa: E402

# Configurations by name: "plain"; "chain-N" (N draft steps, topk 1, N + 1 verify rows);
# "chain-N-stopP" (up to N steps, cut where the draft's probability that all its tokens so far are
# accepted falls below P: --speculative-chain-stop-probability, CPU only);
# "tree-KxS-T" (topk K, S steps, T draft tokens). Chain 2 (3-row verifies) paid best on a 2-core
# CPU, where each further step costs a verify row and a head forward; a launch-bound model on a GPU
# (SmolLM2 on an H200) verifies 16-32 tokens for about what 4 cost (docs/performance.md).
CONFIG_PATTERN = re.compile(r"^(?:plain|chain-([1-9]\d?)(?:-stop(0\.\d+|1))?|tree-([1-9]\d?)x([1-9]\d?)-([1-9]\d{0,2}))$")


def config_flags(name):
    """aerie-generate's speculative flags for a configuration name (ValueError for a bad one)."""
    m = CONFIG_PATTERN.match(name)
    if not m:
        raise ValueError(f"unknown configuration {name!r}: plain, chain-N, chain-N-stopP or tree-KxS-T")
    if name == "plain":
        return []
    if m.group(1):
        stop = ["--speculative-chain-stop-probability", m.group(2)] if m.group(2) else []
        return ["--speculative-num-steps", m.group(1), "--speculative-eagle-topk", "1"] + stop
    topk, steps, tokens = m.group(3), m.group(4), m.group(5)
    return ["--speculative-num-steps", steps, "--speculative-eagle-topk", topk, "--speculative-num-draft-tokens", tokens]


def config_name(text):
    """argparse type: a configuration name, checked."""
    try:
        config_flags(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    return text


DEFAULT_CONFIGS = ["plain", "chain-3", "chain-5", "tree-4x3-8"]
SUMMARY = re.compile(r"aerie-generate: (\d+) requests, (\d+) output tokens in ([\d.e+-]+) s \(([\d.e+-]+) tok/s\)"
                     r"(?:, (\d+) verify forwards \(([\d.e+-]+) tokens per verify\))?")
# Where the time went (builds that print it): batches, the device busy with them and idle between them.
# With --extra=--graph-times: each graph runner's device time a run, the device's time between two runners'
# work, the worker's stages a round.
GRAPH_TIME = re.compile(r"aerie-generate: graph (.+): (\d+) runs, ([\d.e+-]+) ms a run")
GRAPH_GAP = re.compile(r"aerie-generate: gap (.+): (\d+) times, median ([\d.e+-]+) ms, mean ([\d.e+-]+) ms")
STAGES = re.compile(r"aerie-generate: speculative stages, ms a round \((\d+) rounds\): propose ([\d.e+-]+), verify ([\d.e+-]+), "
                    r"accept ([\d.e+-]+), extend ([\d.e+-]+)")
DRAFTED_AHEAD = re.compile(r"(\d+) of the rounds read a chain drafted ahead")
TURNAROUND = re.compile(r"aerie-generate: host time between back-to-back rounds, outside the speculative worker: ([\d.e+-]+) ms a round \((\d+)\)")
# Builds since 2026-12-05 also count the turnarounds by length: "longest X ms; by length: under 25 us P%, 25-50 us P%, ...".
TURNAROUND_LENGTHS = re.compile(r"longest ([\d.e+-]+) ms; by length: (.*)")
TURNAROUND_BUCKET = re.compile(r"\s*([^,%]+?) ([\d.e+-]+)%")
DEVICE_TIME = re.compile(r"aerie-generate: (\d+) batches, the device busy ([\d.e+-]+) s .* idle ([\d.e+-]+) s between them")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--head", required=True, help="the EAGLE-3 head's folder (or with --algorithm STANDALONE the draft model's)")
    ap.add_argument("--algorithm", default="EAGLE3", choices=["EAGLE3", "STANDALONE"],
                    help="STANDALONE: --head is a small Llama of the target's vocabulary (distill_draft.py)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--batch-size", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--temperature", type=float, nargs="+", default=[0.0, 0.7])
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, type=config_name, help="plain, chain-N, tree-KxS-T; plain first: the speedups' baseline (without it the rows have no speedup)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", choices=["held-out", "train"], default="held-out", help="prompts of the held-out or the training topics")
    ap.add_argument("--json", required=True)
    ap.add_argument("--extra", default="", help="more aerie-generate flags for every configuration, e.g. --extra=--disable-overlap-schedule")
    args = ap.parse_args()
    train, held = prompt_sets.split(args.seed)
    prompts = (prompt_sets.prompts(held, args.seed + 2) if args.split == "held-out" else prompt_sets.prompts(train, args.seed + 1))[: args.prompts]
    rows, failures = [], 0
    exact = args.dtype == "f32" or (args.dtype == "auto" and args.device == "cpu")  # f32: greedy outputs must equal plain
    for bs in args.batch_size:
        for temp in args.temperature:
            plain_ids = None
            for name in args.configs:
                cmd = [args.generate, "--model-path", args.model, "--device", args.device, "--dtype", args.dtype, "--chat",
                       "--temperature", str(temp), "--seed", "1", "--max-new-tokens", str(args.max_new),
                       "--max-running-requests", str(bs), "--output", "json"] + args.extra.split() + sum((["--prompt", p] for p in prompts), [])
                if name != "plain":
                    cmd += ["--speculative-algorithm", args.algorithm, "--speculative-draft-model-path", args.head] + config_flags(name)
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                if out.returncode != 0:
                    print(f"FAIL {name} batch {bs} T={temp}: {out.stderr[-1500:]}")
                    failures += 1
                    continue
                m = SUMMARY.search(out.stderr)
                ids = [json.loads(l)["output_ids"] for l in out.stdout.splitlines()]
                row = {"batch": bs, "temperature": temp, "config": name, "requests": int(m.group(1)), "output_tokens": int(m.group(2)),
                       "seconds": float(m.group(3)), "tok_per_s": float(m.group(4)),
                       "accept_length": float(m.group(6)) if m.group(6) else 1.0, "output_ids": ids}
                if t := DEVICE_TIME.search(out.stderr):
                    row.update(batches=int(t.group(1)), device_busy_s=float(t.group(2)), device_idle_s=float(t.group(3)))
                if graphs := GRAPH_TIME.findall(out.stderr):
                    row["graph_ms_a_run"] = {label: {"runs": int(n), "ms": float(ms)} for label, n, ms in graphs}
                if gaps := GRAPH_GAP.findall(out.stderr):
                    row["gap_ms_between_graphs"] = {between: {"times": int(n), "median": float(med), "mean": float(mean)}
                                                    for between, n, med, mean in gaps}
                if st := STAGES.search(out.stderr):
                    row["stage_ms_a_round"] = dict(zip(["propose", "verify", "accept", "extend"], map(float, st.groups()[1:])))
                    row["rounds"] = int(st.group(1))
                if ahead := DRAFTED_AHEAD.search(out.stderr):
                    row["rounds_drafted_ahead"] = int(ahead.group(1))
                if turn := TURNAROUND.search(out.stderr):  # the Scheduler's round trip between verifies
                    row["host_ms_between_rounds"] = float(turn.group(1))
                    if lengths := TURNAROUND_LENGTHS.search(out.stderr):
                        row["host_ms_between_rounds_longest"] = float(lengths.group(1))
                        row["host_between_rounds_percent_by_length"] = {k: float(v) for k, v in TURNAROUND_BUCKET.findall(lengths.group(2))}
                if name == "plain":
                    plain_ids = ids
                    base = row["tok_per_s"]
                row["speedup"] = row["tok_per_s"] / base if plain_ids is not None else None
                if temp == 0 and plain_ids is not None and name != "plain":
                    row["greedy_equal_plain"] = ids == plain_ids
                    row["outputs_equal_plain"] = sum(a == b for a, b in zip(ids, plain_ids))
                    # In f32 speculative greedy decoding must equal plain greedy decoding token for
                    # token; in bf16/f16 the verify's multi-row products round differently from the
                    # one-row decode and near-ties may flip (docs/performance.md), so there it is
                    # reported, not failed.
                    if ids != plain_ids and exact:
                        failures += 1
                rows.append(row)
                print(f"batch {bs:2d} T={temp:.1f} {name:11s} {row['tok_per_s']:9.1f} tok/s  accept {row['accept_length']:.2f}"
                      + (f"  speedup {row['speedup']:.2f}x" if row["speedup"] is not None else "  (no plain run: no speedup)")
                      + (f"  busy {1e3 * row['device_busy_s'] / row['batches']:.3f} / idle {1e3 * row['device_idle_s'] / row['batches']:.3f} ms a batch" if "batches" in row else "") + (f"  outputs equal to plain {row['outputs_equal_plain']}/{len(ids)}" if 'greedy_equal_plain' in row else ""),
                      flush=True)
    # The CPU's int8 mode is an environment switch (AERIE_CPU_INT8_ACTIVATIONS), not a flag: recorded beside the dtype.
    int8 = args.device == "cpu" and os.environ.get("AERIE_CPU_INT8_ACTIVATIONS", "0") not in ("", "0")
    json.dump({"device": args.device, "dtype": args.dtype, "cpu_int8_activations": int8, "algorithm": args.algorithm, "prompts": len(prompts),
               "max_new_tokens": args.max_new, "extra": args.extra, "rows": rows},
              open(args.json, "w"), indent=2)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
