#!/usr/bin/env python3
"""tools/eval_tables.py prints each batch size's configurations with their tok/s, speedup and
accept length, and the device's busy / idle time a batch where the run recorded it."""
import contextlib
import io
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from eval_tables import print_eval_run, print_setting_ab  # noqa: E402


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
    check_setting_ab()
    print("eval_tables: ok")


def check_setting_ab():
    # gpu_spec_setting_ab.sh's logs: a setting named as another's prefix ("inproc", "inproc_overlap")
    # keeps its own runs; answers are compared with the first setting's.
    with tempfile.TemporaryDirectory() as logs:
        def put(name, tok, ids):
            r = row(1, "chain-5", tok, tok / 1600, 2.94)
            r["output_ids"] = ids
            json.dump({"rows": [r]}, open(os.path.join(logs, name), "w"))
        put("eval_base_1.json", 3000.0, [[1, 2], [3, 4]])
        put("eval_inproc_1.json", 2900.0, [[1, 2], [3, 5]])
        put("eval_inproc_overlap_1.json", 3200.0, [[1, 2], [3, 4]])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print_setting_ab(logs, ["base", "inproc", "inproc_overlap"])
        lines = out.getvalue().splitlines()
        inproc = [line for line in lines if "inproc batch" in line and "overlap" not in line]
        assert inproc == ["    inproc batch 1: chain-5 2900 (1.81x, 2.94)"], lines
        assert "  eval_inproc_1.json chain-5: 1/2 answers the same as base's" in lines, lines
        assert "  eval_inproc_overlap_1.json chain-5: 2/2 answers the same as base's" in lines, lines
        assert sum("answers the same" in line for line in lines) == 2, lines


if __name__ == "__main__":
    main()
