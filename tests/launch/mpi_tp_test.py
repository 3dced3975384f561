#!/usr/bin/env python3
"""Tensor parallelism end to end on CPU under mpirun (MPI collectives, fp32): aerie-generate
with --tp-size 2, --tp-size 4 (the tiny model has 2 KV heads, so TP4 replicates them) and
--tp-size 2 --dp-size 2 gives every request exactly the tokens of one process, plain and
with EAGLE3 / EAGLE / STANDALONE speculation, chain and tree; a KV pool small enough to
preempt; layouts that do not fit are refused with a clear message before weights load; and
aerie-serve under TP2 answers HTTP with the same tokens.

  mpi_tp_test.py --generate BIN/aerie-generate --serve BIN/aerie-serve --mpirun MPIRUN
"""
import argparse
import json
import os
import random
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
    rng = random.Random(23)
    prompts = [[rng.randrange(3, 500) for _ in range(rng.randint(1, 60))] for _ in range(40)]
    base = [args.generate, "--load-format", "dummy", "--max-new-tokens", "10", "--temperature", "0", "--ignore-eos",
            "--page-size", "4", "--output", "json"]
    for p in prompts:
        base += ["--input-ids", ",".join(map(str, p))]

    def mpi(np):
        return [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(np), "-x", "NCCL_NVLS_ENABLE=0"]

    single = {}
    for spec in ([], ["--speculative-algorithm", "EAGLE3"]):
        rc, out, err = run(base + spec)
        assert rc == 0 and len(out) == len(prompts), f"single process {spec} failed ({rc}): {err}"
        single[tuple(spec)] = [o["output_ids"] for o in out]
    # Speculation never changes greedy tokens (tested elsewhere): every run below compares
    # against the plain single-process output.
    want = single[()]
    assert single[("--speculative-algorithm", "EAGLE3")] == want

    cases = [
        (2, ["--tp-size", "2"]),
        (4, ["--tp-size", "4"]),
        (4, ["--tp-size", "2", "--dp-size", "2"]),
        (2, ["--tp-size", "2", "--max-total-tokens", "160"]),  # preemption
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE3"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "5"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE"]),
        # The next chain drafted ahead on every rank (on CUDA by default): the same decisions on
        # each, the draft's collectives in the same order; with the draft over one rank too.
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE3", "--draft-ahead", "on", "--max-total-tokens", "160"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE", "--draft-ahead", "on", "--speculative-draft-tensor-parallel-size", "1",
             "--enable-spec-overlap"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE3", "--speculative-draft-tensor-parallel-size", "1"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "5",
             "--speculative-draft-tensor-parallel-size", "1"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "5"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "STANDALONE"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "STANDALONE", "--speculative-eagle-topk", "2",
             "--speculative-num-draft-tokens", "4"]),
        (4, ["--tp-size", "4", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "5"]),
        (4, ["--tp-size", "2", "--dp-size", "2", "--speculative-algorithm", "EAGLE"]),
        (4, ["--tp-size", "2", "--dp-size", "2", "--speculative-algorithm", "STANDALONE", "--speculative-eagle-topk", "2",
             "--speculative-num-draft-tokens", "4"]),
        # Overlap scheduling off, and verifies planned ahead (remote ranks get the next batch at once).
        (2, ["--tp-size", "2", "--disable-overlap-schedule"]),
        (2, ["--tp-size", "2", "--speculative-algorithm", "EAGLE3", "--enable-spec-overlap"]),
        (4, ["--tp-size", "2", "--dp-size", "2", "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2",
             "--speculative-num-draft-tokens", "5", "--enable-spec-overlap"]),
    ]
    for np, flags in cases:
        rc, out, err = run(mpi(np) + base + flags)
        name = f"mpirun -np {np} {' '.join(flags)}"
        assert rc == 0, f"{name} failed ({rc}): {err[-3000:]}"
        assert len(out) == len(prompts), f"{name}: {len(out)} results from rank 0, expected {len(prompts)}"
        for i, (o, w) in enumerate(zip(out, want)):
            assert o["output_ids"] == w, f"{name}: prompt {i}: {o['output_ids']} != {w}"
            if "--speculative-algorithm" in flags:
                assert 0 < o["spec_verify_ct"] <= 10, f"{name}: prompt {i}: spec_verify_ct {o['spec_verify_ct']}"
        print(f"{len(prompts)} prompts identical to one process: {name}")

    # Layouts that do not fit: refused on every rank with the fix, before weights load.
    bad = [
        (2, ["--tp-size", "2", "--dp-size", "2"], "mpirun -np 4"),
        (3, ["--tp-size", "3"], "4 attention heads do not divide over 3 ranks"),
        (2, ["--tp-size", "2", "--device", "cuda"], "no usable CUDA device"),
        (2, ["--tp-size", "2", "--speculative-algorithm", "STANDALONE", "--speculative-draft-tensor-parallel-size", "1"],
         "is for EAGLE heads"),
    ]
    for np, flags, message in bad:
        rc, out, err = run(mpi(np) + [args.generate, "--load-format", "dummy", "--input-ids", "1,2,3", "--max-new-tokens", "2"] + flags)
        assert rc != 0 and message in err, f"{' '.join(flags)} under -np {np}: rc {rc}, expected '{message}' in: {err[-2000:]}"
        assert "making random weights" not in err, f"{' '.join(flags)}: weights were made before the layout was refused"
        print(f"refused: -np {np} {' '.join(flags)}: {message}")

    # aerie-serve under TP2 answers HTTP with one process's tokens.
    with running_server(args.serve, ["--load-format", "dummy", "--tp-size", "2", "--max-total-tokens", "4096"], startup_s=120,
                        launcher=mpi(2)) as (url, _):
        for i in (0, 1, 2):
            body = json.dumps({"input_ids": prompts[i], "sampling_params": {"max_new_tokens": 10, "temperature": 0,
                                                                             "ignore_eos": True}}).encode()
            req = urllib.request.Request(url + "/generate", data=body, headers={"Content-Type": "application/json"})
            reply = json.loads(urllib.request.urlopen(req, timeout=120).read())
            assert reply["output_ids"] == want[i], f"/generate under TP2, prompt {i}: {reply}"
        info = json.loads(urllib.request.urlopen(url + "/get_server_info", timeout=30).read())
        print("aerie-serve under mpirun -np 2 --tp-size 2 answers /generate with one process's tokens; server info tp_size:",
              info.get("tp_size"))
    print("mpi_tp_test: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
