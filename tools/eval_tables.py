"""Printing eval_spec.py results as the GPU A/B scripts show them (tools/gpu_spec_build_ab.sh,
tools/gpu_spec_setting_ab.sh): one line a batch size with each configuration's tok/s, its speedup
over plain decoding in the same run and its accept length, then, where the build printed them, the
device's busy and idle time a batch."""


def print_eval_run(name, run, width=4):
    for b in sorted({d["batch"] for d in run["rows"]}):
        r = [d for d in run["rows"] if d["batch"] == b]
        print(f"  {name:>{width}} batch {b}: " + " | ".join(
            f"{d['config']} {d['tok_per_s']:.0f} ({d['speedup']:.2f}x, {d['accept_length']:.2f})" for d in r))
        if any("batches" in d for d in r):
            print(" " * (width + 3) + "device busy / idle, ms a batch: " + " | ".join(
                f"{d['config']} {1e3 * d['device_busy_s'] / d['batches']:.3f} / {1e3 * d['device_idle_s'] / d['batches']:.3f}"
                for d in r if "batches" in d))
