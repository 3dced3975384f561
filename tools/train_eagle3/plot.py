#!/usr/bin/env python3
"""Plots eval_spec.py results: accept length per configuration (greedy and T=0.7) and output
tokens/s with and without speculation against batch size, one PNG each per results file.

  plot.py RESULTS.json [...]   (writes RESULTS_accept.png and RESULTS_throughput.png beside each)
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    for path in sys.argv[1:]:
        doc = json.load(open(path))
        rows = doc["rows"]
        stem = os.path.splitext(path)[0]
        mode = " (int8 activations)" if doc.get("cpu_int8_activations") else ""
        where = f"{doc['device']} {doc['dtype']}{mode}, {doc['prompts']} held-out prompts x {doc['max_new_tokens']} tokens"
        configs = [c for c in dict.fromkeys(r["config"] for r in rows) if c != "plain"]
        temps = sorted(set(r["temperature"] for r in rows))
        bs0 = min(r["batch"] for r in rows)
        fig, ax = plt.subplots(figsize=(6, 3.5))
        w = 0.8 / len(temps)
        for i, t in enumerate(temps):
            vals = [next((r["accept_length"] for r in rows if r["config"] == c and r["temperature"] == t and r["batch"] == bs0), 0) for c in configs]
            ax.bar([x + i * w for x in range(len(configs))], vals, w, label=f"T={t}")
        ax.set_xticks([x + w * (len(temps) - 1) / 2 for x in range(len(configs))], configs)
        ax.set_ylabel("tokens per verify")
        ax.set_title(f"EAGLE-3 accept length, batch {bs0}\n{where}", fontsize=9)
        ax.legend()
        fig.tight_layout()
        fig.savefig(stem + "_accept.png", dpi=110)
        fig, ax = plt.subplots(figsize=(6, 3.5))
        batches = sorted(set(r["batch"] for r in rows))
        for c in ["plain"] + configs:
            ys = [next((r["tok_per_s"] for r in rows if r["config"] == c and r["temperature"] == 0 and r["batch"] == b), None) for b in batches]
            ax.plot(batches, ys, marker="o", label=c)
        ax.set_xlabel("batch size (max running requests)")
        ax.set_ylabel("output tokens/s (greedy)")
        ax.set_xticks(batches)
        ax.set_title(f"with and without speculation\n{where}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(stem + "_throughput.png", dpi=110)
        print(f"wrote {stem}_accept.png, {stem}_throughput.png")


if __name__ == "__main__":
    main()
