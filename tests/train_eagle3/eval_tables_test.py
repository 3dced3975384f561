#!/usr/bin/env python3
"""tools/eval_tables.py prints each batch size's configurations with their tok/s, speedup and
accept length, and the device's busy / idle time a batch where the run recorded it."""
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from eval_tables import print_eval_run  # noqa: E402


def row(batch, config, tok, speedup, accept, batches=None):
    d = {"batch": batch, "config": config, "tok_per_s": tok, "speedup": speedup, "accept_length": accept}
    if batches:
        d.update(batches=batches, device_busy_s=0.5 * batches / 1e3, device_idle_s=0.25 * batches / 1e3)
    return d


def main():
    run = {"rows": [row(1, "plain", 1600.4, 1.0, 1.0, 100), row(1, "chain-5", 3200.0, 2.0, 2.94, 40),
                    row(8, "plain", 9000.0, 1.0, 1.0)]}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_eval_run("side", run)
    lines = out.getvalue().splitlines()
    assert lines[0] == "  side batch 1: plain 1600 (1.00x, 1.00) | chain-5 3200 (2.00x, 2.94)", lines[0]
    assert lines[1] == "       device busy / idle, ms a batch: plain 0.500 / 0.250 | chain-5 0.500 / 0.250", lines[1]
    assert lines[2] == "  side batch 8: plain 9000 (1.00x, 1.00)", lines[2]
    assert len(lines) == 3, lines  # batch 8 recorded no device times
    print("eval_tables: ok")


if __name__ == "__main__":
    main()
