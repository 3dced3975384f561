#!/usr/bin/env python3
"""DP attention end to end on CPU under mpirun (MPI collectives, fp32): aerie-generate with
--enable-dp-attention for T=2,D=2 / T=4,D=4 / T=4,D=2 gives every request exactly the greedy
tokens of one process, plain and with EAGLE3 chain and tree drafting — with uneven batches,
one group idle for many steps, a long prompt prefilling in chunks while the other groups
decode or verify, and a KV pool tight enough to preempt. Under --log-level debug every rank
logs each step's bucket, and the ranks agree on it step by step. Layouts that do not fit are
refused before any weight is made. aerie-serve under DP attention answers HTTP with the same
tokens.

  mpi_dpa_test.py --generate BIN/aerie-generate --serve BIN/aerie-serve --mpirun MPIRUN
"""
import argparse
import collections
import concurrent.futures
import json
import random
import re
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import running_server  # noqa: E402


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return out.returncode, [json.loads(l) for l in out.stdout.splitlines() if l.strip().startswith("{")], out.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", required=True)
    ap.add_argument("--serve", required=True)
    ap.add_argument("--mpirun", required=True)
    args = ap.parse_args()
    rng = random.Random(31)
    # Uneven: 1 to 60 prompt tokens, and one prompt of 300 that prefills in chunks of 32
    # while the other groups decode.
    prompts = [[rng.randrange(3, 500) for _ in range(rng.randint(1, 60))] for _ in range(23)]
    prompts.append([rng.randrange(3, 500) for _ in range(300)])
    common = [args.generate, "--load-format", "dummy", "--temperature", "0", "--ignore-eos", "--page-size", "4", "--output", "json",
              "--chunked-prefill-size", "32"]

    def with_prompts(ps, new_tokens):
        flags = ["--max-new-tokens", str(new_tokens)]
        for p in ps:
            flags += ["--input-ids", ",".join(map(str, p))]
        return flags

    def mpi(np):
        return [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(np), "-x", "NCCL_NVLS_ENABLE=0"]

    def reference(ps, new_tokens):
        rc, out, err = run(common + with_prompts(ps, new_tokens))
        assert rc == 0 and len(out) == len(ps), f"single process failed ({rc}): {err}"
        return [o["output_ids"] for o in out]

    many = with_prompts(prompts, 10)
    want_many = reference(prompts, 10)
    # One request that decodes long: every other group idles for all its steps.
    lone = [prompts[5]]
    want_lone = reference(lone, 40)

    eagle3 = ["--speculative-algorithm", "EAGLE3"]
    tree = eagle3 + ["--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "5"]
    cases = []
    for np, tp, dp in ((2, 2, 2), (4, 4, 4), (4, 4, 2)):
        layout = ["--tp-size", str(tp), "--dp-size", str(dp), "--enable-dp-attention"]
        cases += [(np, layout, many, want_many), (np, layout + eagle3, many, want_many), (np, layout + tree, many, want_many)]
    cases += [
        (2, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"], with_prompts(lone, 40), want_lone),
        (4, ["--tp-size", "4", "--dp-size", "2", "--enable-dp-attention"] + eagle3, with_prompts(lone, 40), want_lone),
        (2, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention", "--max-total-tokens", "320"], many, want_many),  # preemption
        (2, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention", "--max-total-tokens", "320"] + eagle3, many, want_many),
        (2, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention", "--disable-cuda-graph"] + tree, many, want_many),  # no buckets
        # Overlap scheduling: off, and verifies planned ahead (the coordinator collects step N+1 while N runs).
        (2, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention", "--disable-overlap-schedule"], many, want_many),
        (2, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention", "--enable-spec-overlap"] + eagle3, many, want_many),
        (2, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention", "--enable-spec-overlap"] + tree, many, want_many),
        (4, ["--tp-size", "4", "--dp-size", "2", "--enable-dp-attention", "--enable-spec-overlap"] + eagle3, with_prompts(lone, 40), want_lone),
        (2, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention", "--max-total-tokens", "320", "--enable-spec-overlap"] + eagle3,
         many, want_many),
    ]
    for np, flags, prompt_flags, want in cases:
        rc, out, err = run(mpi(np) + common + prompt_flags + flags + ["--log-level", "debug"])
        name = f"mpirun -np {np} {' '.join(flags)}" + (" (one request)" if len(want) == 1 else "")
        assert rc == 0, f"{name} failed ({rc}): {err[-3000:]}"
        assert len(out) == len(want), f"{name}: {len(out)} results from rank 0, expected {len(want)}"
        for i, (o, w) in enumerate(zip(out, want)):
            assert o["output_ids"] == w, f"{name}: prompt {i}: {o['output_ids']} != {w}"
        # Every rank logs each step's bucket; they must agree, step by step.
        per_rank = collections.defaultdict(dict)
        for m in re.finditer(r"rank (\d+): DP step (\d+) bucket (\d+) padding (\w+)", err):
            per_rank[int(m.group(1))][int(m.group(2))] = (int(m.group(3)), m.group(4))
        assert sorted(per_rank) == list(range(np)), f"{name}: step logs from ranks {sorted(per_rank)}"
        steps = per_rank[0]
        for r in range(1, np):
            assert per_rank[r] == steps, f"{name}: rank {r}'s buckets differ from rank 0's"
        padded = sum(1 for b, _ in steps.values() if b > 0)
        if "--disable-cuda-graph" in flags:
            assert padded == 0, f"{name}: {padded} steps padded to a bucket with graphs off"
        pre = ""
        if "--max-total-tokens" in flags:
            preempted = err.count("KV pool full: preempted request")
            assert preempted > 0, f"{name}: the tight KV pool preempted nothing"
            pre = f"({preempted} preemptions)"
        print(f"{len(want)} prompts identical to one process: {name}; {len(steps)} steps, {padded} padded to a bucket, "
              f"same bucket on all {np} ranks {pre}")

    bad = [
        (4, ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"], "mpirun -np 2"),
        (4, ["--tp-size", "4", "--dp-size", "3", "--enable-dp-attention"], "dividing --tp-size"),
        (2, ["--tp-size", "2", "--dp-size", "1", "--enable-dp-attention"], "--dp-size > 1"),
    ]
    for np, flags, message in bad:
        rc, out, err = run(mpi(np) + [args.generate, "--load-format", "dummy", "--input-ids", "1,2,3", "--max-new-tokens", "2"] + flags)
        assert rc != 0 and message in err, f"{' '.join(flags)} under -np {np}: rc {rc}, expected '{message}' in: {err[-2000:]}"
        assert "making random weights" not in err, f"{' '.join(flags)}: weights were made before the layout was refused"
        print(f"refused: -np {np} {' '.join(flags)}: {message}")
    # aerie-serve under DP attention: requests spread over both groups, one process's tokens.
    with running_server(args.serve, ["--load-format", "dummy", "--tp-size", "2", "--dp-size", "2", "--enable-dp-attention",
                                     "--max-total-tokens", "4096"], startup_s=120, launcher=mpi(2)) as (url, _):
        def generate(i):
            body = json.dumps({"input_ids": prompts[i], "sampling_params": {"max_new_tokens": 10, "temperature": 0,
                                                                             "ignore_eos": True}}).encode()
            req = urllib.request.Request(url + "/generate", data=body, headers={"Content-Type": "application/json"})
            return json.loads(urllib.request.urlopen(req, timeout=120).read())

        with concurrent.futures.ThreadPoolExecutor(8) as pool:  # at once, so the Router uses both groups
            replies = list(pool.map(generate, range(8)))
        for i, reply in enumerate(replies):
            assert reply["output_ids"] == want_many[i], f"/generate under DP attention, prompt {i}: {reply}"
        print("aerie-serve under mpirun -np 2 --tp-size 2 --dp-size 2 --enable-dp-attention answers /generate with one process's tokens")
    print("mpi_dpa_test: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
