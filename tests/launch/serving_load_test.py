#!/usr/bin/env python3
"""256 concurrent streaming requests against aerie-serve (tiny model, CPU) through
`aerie-bench serving`: every request completes and the p99 time to first token is under 1 s.

  serving_load_test.py --serve BIN/aerie-serve --bench BIN/aerie-bench
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--p99-ttft-ms", type=float, default=1000.0)
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen([args.serve, "--load-format", "dummy", "--port", str(port), "--max-total-tokens", "65536"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("server did not come up")
        out_file = os.path.join(tempfile.mkdtemp(prefix="aerie_load_"), "result.json")
        cmd = [args.bench, "serving", "--port", str(port), "--num-prompts", "256", "--random-input-len", "64",
               "--random-output-len", "32", "--random-range-ratio", "0.5", "--output-file", out_file, "--seed", "1"]
        b = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        print(b.stdout)
        assert b.returncode == 0, b.stderr[-3000:]
        r = json.load(open(out_file))
        assert r["completed"] == 256 and r["failed"] == 0, r
        assert r["concurrency"] > 128, f"requests did not overlap: concurrency {r['concurrency']:.1f}"
        assert r["p99_ttft_ms"] < args.p99_ttft_ms, f"p99 TTFT {r['p99_ttft_ms']:.0f} ms >= {args.p99_ttft_ms:.0f} ms"
        print(f"256 concurrent streams: p99 TTFT {r['p99_ttft_ms']:.0f} ms, {r['output_throughput']:.0f} output tok/s")
    finally:
        server.send_signal(signal.SIGTERM)
        rc = server.wait(timeout=60)
    assert rc == 0, f"server exit {rc}: {server.stderr.read()[-3000:]}"


if __name__ == "__main__":
    main()
