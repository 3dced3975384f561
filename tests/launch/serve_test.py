#!/usr/bin/env python3
"""aerie-serve end to end: sglang /generate bodies as JSON lines on stdin give the same
tokens as aerie-generate, in one process and under mpirun -np 2 --dp-size 2; malformed
lines (invalid UTF-8 among them) get an error line with a code and the service keeps
answering.

  serve_test.py --serve BIN/aerie-serve --generate BIN/aerie-generate --mpirun MPIRUN
"""
import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import greedy_reference  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--generate", required=True)
    ap.add_argument("--mpirun", required=True)
    args = ap.parse_args()
    rng = random.Random(5)
    prompts = [[rng.randrange(3, 500) for _ in range(rng.randint(1, 30))] for _ in range(24)]
    expected = greedy_reference(args.generate, prompts, 10)

    lines = []
    for i, p in enumerate(prompts):
        lines.append(json.dumps({"rid": f"r{i}", "input_ids": p,
                                 "sampling_params": {"max_new_tokens": 10, "temperature": 0, "ignore_eos": True}}))
        if i == 3:
            lines += ["{not json", json.dumps({"input_ids": []}), json.dumps({"input_ids": [1, 10**6]}),
                      json.dumps({"input_ids": [1], "sampling_params": {"temperature": -1}}),
                      json.dumps({"input_ids": [1], "sampling_params": {"max_new_tokens": "many"}})]
    # Invalid UTF-8 in the middle (the frontend used to die writing its error, losing the rest).
    stdin = ("\n".join(lines[:6]) + "\n").encode() + b'{"text": "\xff\xfe"}\n' + ("\n".join(lines[6:]) + "\n").encode()
    mpi = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    for name, cmd in (("one process", [args.serve, "--stdin-json", "--load-format", "dummy", "--max-total-tokens", "2048"]),
                      ("mpirun -np 2 --dp-size 2", mpi + [args.serve, "--stdin-json", "--load-format", "dummy", "--dp-size", "2",
                                                           "--max-total-tokens", "512"])):
        res = subprocess.run(cmd, input=stdin, capture_output=True, timeout=300)
        assert res.returncode == 0, f"{name}: exit {res.returncode}: {res.stderr.decode(errors='replace')}"
        replies = [json.loads(l) for l in res.stdout.decode().splitlines() if l.strip()]
        errors = [r for r in replies if "error" in r]
        ok = {r["rid"]: r for r in replies if "error" not in r}
        assert len(errors) == 6, f"{name}: {len(errors)} error lines, expected 6: {errors}"
        assert all(e["error"]["code"] == "invalid_request" for e in errors), errors
        assert len(ok) == len(prompts), f"{name}: {len(ok)} results for {len(prompts)} requests"
        for i, exp in enumerate(expected):
            r = ok[f"r{i}"]
            assert r["output_ids"] == exp, f"{name}: request {i}: {r['output_ids']} != {exp}"
            # The same meta_info shape as HTTP /generate (sglang's finish_reason object, cached_tokens).
            assert r["meta_info"]["finish_reason"] == {"type": "length", "length": 10} and r["meta_info"]["completion_tokens"] == 10, r
            assert r["meta_info"]["cached_tokens"] == 0 and "spec_verify_ct" in r["meta_info"], r
        print(f"{name}: {len(ok)} results equal aerie-generate, 6 malformed lines answered with errors")
    print("serve_test: all checks passed")


if __name__ == "__main__":
    main()
