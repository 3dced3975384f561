"""What the Python tests that run the real model share (fidelity/smollm2_parity.py,
train_eagle3/*): the SmolLM2 GGUF (fetched once by tools/fetch_smollm2.py), or a skip (exit code
77, ctest's SKIP_RETURN_CODE) when it is not available offline, and a failed check's exit."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def smollm2_path():
    fetched = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fetch_smollm2.py")], capture_output=True, text=True)
    if fetched.returncode != 0:
        print(f"SKIP: SmolLM2 is not available offline ({fetched.stderr.strip()[-200:]})")
        sys.exit(77)
    return fetched.stdout.strip()


def run_unit_then_engine(unit, engine):
    """A test of a torch unit part and, given --generate BIN, a real-model part through aerie-generate."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--generate", default="")
    args = ap.parse_args()
    unit()
    if args.generate:
        engine(args.generate)
    print("PASS")
