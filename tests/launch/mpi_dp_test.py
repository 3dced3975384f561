#!/usr/bin/env python3
"""aerie-generate under `mpirun -np 2 ... --dp-size 2` (two replicas behind the Router, the
second on rank 1 over ZeroMQ) gives every request exactly the tokens of the single-process
run: 64 prompts of mixed lengths, with a roomy KV pool and with one small enough to force
preemption, and with speculative decoding (chain and tree) on both ranks; and a request
that can never fit is rejected with a clear error.

  mpi_dp_test.py --generate PATH/aerie-generate --mpirun PATH/mpirun
"""
import argparse
import json
import random
import subprocess
import sys


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return out.returncode, [json.loads(l) for l in out.stdout.splitlines() if l.strip()], out.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", required=True)
    ap.add_argument("--mpirun", required=True)
    args = ap.parse_args()
    rng = random.Random(11)
    prompts = [",".join(str(rng.randrange(3, 500)) for _ in range(rng.randint(1, 60))) for _ in range(64)]
    base = [args.generate, "--load-format", "dummy", "--max-new-tokens", "12", "--temperature", "0", "--ignore-eos",
            "--page-size", "4", "--output", "json"]
    for p in prompts:
        base += ["--input-ids", p]
    mpi = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "NCCL_NVLS_ENABLE=0"]
    rc, single, err = run(base)
    assert rc == 0 and len(single) == 64, f"single process failed ({rc}): {err}"
    for pool in (None, "160"):
        extra = ["--dp-size", "2"] + (["--max-total-tokens", pool] if pool else [])
        rc, dp, err = run(mpi + base + extra)
        assert rc == 0, f"mpirun --dp-size 2 failed ({rc}): {err}"
        assert len(dp) == 64, f"{len(dp)} results from rank 0, expected 64"
        for i, (a, b) in enumerate(zip(single, dp)):
            assert a == b, f"prompt {i} (pool {pool}): single {a} vs dp {b}"
        print(f"64 prompts identical under mpirun -np 2 --dp-size 2 (KV pool {pool or 'roomy'})")
    # Speculative decoding on both ranks (rank 1's DraftWorker actor runs behind its bridge):
    # the same greedy tokens, chain and tree.
    for spec in (["--speculative-algorithm", "EAGLE3"],
                 ["--speculative-algorithm", "STANDALONE", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "5"]):
        rc, dp, err = run(mpi + base + ["--dp-size", "2"] + spec)
        assert rc == 0 and len(dp) == 64, f"mpirun --dp-size 2 {' '.join(spec)} failed ({rc}): {err}"
        for i, (a, b) in enumerate(zip(single, dp)):
            assert a["output_ids"] == b["output_ids"] and b["spec_verify_ct"] > 0, f"prompt {i} ({' '.join(spec)}): single {a} vs dp {b}"
        print(f"64 prompts identical under mpirun -np 2 --dp-size 2 {' '.join(spec)}")
    rc, out, err = run(mpi + [args.generate, "--load-format", "dummy", "--dp-size", "2", "--max-total-tokens", "16",
                              "--input-ids", ",".join(["5"] * 40), "--max-new-tokens", "4", "--output", "json"])
    assert rc == 2 and out and "can never fit" in out[0].get("error", ""), f"never-fit not rejected: {rc} {out} {err}"
    print("a request that can never fit is rejected:", out[0]["error"][:80])
    print("mpi_dp_test: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
