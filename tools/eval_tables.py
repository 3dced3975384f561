"""Printing eval_spec.py results as the GPU A/B scripts show them (tools/gpu_spec_build_ab.sh,
tools/gpu_spec_setting_ab.sh): one line a batch size with each configuration's tok/s, its speedup
over plain decoding in the same run and its accept length, then, where the build printed them, the
device's busy and idle time a batch.

  python3 tools/eval_tables.py setting-ab LOGS "name:flags name:flags ..."
prints gpu_spec_setting_ab.sh's tables from its logs folder (each setting's runs
eval_<name>_<round>.json and gaps_<name>.json), e.g. again from a logs.tgz brought back."""
import glob
import json
import os
import sys


def print_eval_run(name, run, width=4):
    for b in sorted({d["batch"] for d in run["rows"]}):
        r = [d for d in run["rows"] if d["batch"] == b]
        print(f"  {name:>{width}} batch {b}: " + " | ".join(
            f"{d['config']} {d['tok_per_s']:.0f} ({d['speedup']:.2f}x, {d['accept_length']:.2f})" for d in r))
        if any("batches" in d for d in r):
            print(" " * (width + 3) + "device busy / idle, ms a batch: " + " | ".join(
                f"{d['config']} {1e3 * d['device_busy_s'] / d['batches']:.3f} / {1e3 * d['device_idle_s'] / d['batches']:.3f}"
                for d in r if "batches" in d))


def setting_runs(logs, name, kind="eval"):
    """A setting's runs: eval_<name>_<round>.json (rounds are numbers, so a setting named as
    another's prefix does not take its runs) or gaps_<name>.json."""
    pattern = f"eval_{name}_[0-9]*.json" if kind == "eval" else f"gaps_{name}.json"
    return [(f, json.load(open(f))) for f in sorted(glob.glob(os.path.join(logs, pattern)))]


def print_setting_ab(logs, settings):
    """gpu_spec_setting_ab.sh's report: each setting's runs, where the device's time went in its
    --graph-times run, whether its greedy answers are the first setting's, and (with an f32 plain
    run) how often each setting's bf16 plain answers are the f32 ones."""
    print("Real SmolLM2 + head, greedy (eval_spec.py): tok/s (speedup over plain in the same run), accept length")
    for name in settings:
        for _, run in setting_runs(logs, name):
            print_eval_run(name, run, width=8)
    print("Where the device's time goes (--graph-times): ms a run; gaps between runners, median / mean ms (times)")
    for name in settings:
        for _, run in setting_runs(logs, name, "gaps"):
            for d in run["rows"]:
                print(f"  {name:>8} {d['config']} ({d['tok_per_s']:.0f} tok/s, {d['speedup']:.2f}x):")
                for label, g in sorted(d.get("graph_ms_a_run", {}).items()):
                    print(f"      {label}: {g['runs']} runs, {g['ms']:.4f} ms a run")
                for between, g in sorted(d.get("gap_ms_between_graphs", {}).items()):
                    print(f"      gap {between}: {g['median']:.4f} / {g['mean']:.4f} ({g['times']})")
                if "host_ms_between_rounds" in d:
                    shares = ", ".join(f"{k} {v:.1f}%" for k, v in d.get("host_between_rounds_percent_by_length", {}).items())
                    print(f"      host between rounds: mean {d['host_ms_between_rounds']:.4f} ms, longest "
                          f"{d.get('host_ms_between_rounds_longest', float('nan')):.3f}; {shares}")
    first = {}
    for _, run in setting_runs(logs, settings[0]):
        for d in run["rows"]:
            first.setdefault((d["batch"], d["config"]), d.get("output_ids"))
    for name in settings[1:]:
        for f, run in setting_runs(logs, name):
            for d in run["rows"]:
                a, b = first.get((d["batch"], d["config"])), d.get("output_ids")
                if a and b:
                    print(f"  {os.path.basename(f)} {d['config']}: {sum(x == y for x, y in zip(a, b))}/{len(b)} answers the same as {settings[0]}'s")
    ref = glob.glob(os.path.join(logs, "f32_plain.json"))
    if ref:
        f32 = json.load(open(ref[0]))["rows"][0]["output_ids"]
        print("bf16 plain decoding against f32 plain decoding: first token the same / whole answer the same")
        for name in settings:
            for f, run in setting_runs(logs, name):
                b = next(d for d in run["rows"] if d["config"] == "plain")["output_ids"]
                print(f"  {os.path.basename(f)}: {sum(x[0] == y[0] for x, y in zip(f32, b))}/{len(b)} / {sum(x == y for x, y in zip(f32, b))}/{len(b)}")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "setting-ab":
        sys.exit(__doc__)
    print_setting_ab(sys.argv[2], [s.split(":")[0] for s in sys.argv[3].split()])
