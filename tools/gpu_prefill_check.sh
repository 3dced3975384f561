#!/usr/bin/env bash
# On one H200 (device kind nvidia-h200), with .device.tgz from tools/device_pack.sh carried:
# issue #21's prefill goal (8B shape, 512- and 4096-token prompts, >= 60% of the measured dense
# matmul rate) in one call.
#  - ab: aerie-bench one-batch prefill with each setting of PREFILL_SETTINGS (NAME:ENV=VALUE,...;
#        "base:" runs the defaults), interleaved over ROUNDS rounds so clocks and neighbours drift
#        alike; the table in $OUT/prefill_ab.txt, each run's JSON in $OUT/logs.tgz
#  - profile: Nsight Compute times every kernel of a 4096-token prefill (gpu__time_duration, clocks
#        not locked); tools/kernel_time_table.py groups them by kernel into $OUT/prefill_profile.txt;
#        then one prefill attention launch in detail (stall reasons) into $OUT/prefill_attention_ncu.txt
#  - tests: every gpu test (the prefill attention against the CPU among them)
#   device run (carry [".device.tgz"]): bash tools/gpu_prefill_check.sh [ab|profile|tests|all]
set -uo pipefail
RESULTS=${OUT:-/tmp/aerie-gpu-prefill}
source "$(dirname "$0")/gpu_steps.sh"
what=${1:-all}
SETTINGS=${PREFILL_SETTINGS:-"base:"}
ROUNDS=${ROUNDS:-2}
LENS=${LENS:-"512 4096"}
ONE=("$B/aerie-bench" one-batch --load-format dummy --cuda-graph off --model-shape llama-3.1-8b --batch-size 1 --output-len 2)
if [[ $what == tests || $what == all ]]; then
  STEP_TAIL=6 step gpu_tests 300 "$B/gpu_test"
fi
if [[ $what == ab || $what == all ]]; then
  for round in $(seq 1 "$ROUNDS"); do
    for len in $LENS; do
      for setting in $SETTINGS; do
        name=${setting%%:*}
        IFS=, read -r -a envs <<< "${setting#*:}"
        STEP_TAIL=2 step "prefill_${len}_${name}_${round}" 240 env "${envs[@]}" "${ONE[@]}" --input-len "$len" \
          --json "$LOGS/prefill_${len}_${name}_${round}.json"
      done
    done
  done
  {
  python3 - "$LOGS" <<'PY'
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "prefill_*_*_*.json"))):
    _, length, name, rnd = os.path.basename(f)[:-5].split("_", 3)
    d = json.load(open(f))
    r = d["results"][0]
    rows.setdefault((int(length), name), []).append((r["prefill_ms"], r["prefill_mfu"], r["prefill_mfu_vs_zeros_rate"],
                                                     d["matmul_flops_per_s"] / 1e12, d["matmul_flops_per_s_zeros"] / 1e12))
print(f"{'prompt':>6} {'setting':>10}  prefill ms per round  MFU (random-data rate) per round  MFU (zeros rate)  dense TFLOP/s random / zeros")
for (length, name), v in sorted(rows.items()):
    print(f"{length:>6} {name:>10}  {' '.join(f'{x[0]:.1f}' for x in v):>20}  {' '.join(f'{100 * x[1]:.1f}%' for x in v):>32}"
          f"  {' '.join(f'{100 * x[2]:.1f}%' for x in v):>16}  {' '.join(f'{x[3]:.0f}/{x[4]:.0f}' for x in v)}")
PY
  } | tee "$RESULTS/prefill_ab.txt"
fi
if [[ $what == profile || $what == all ]]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [[ -z $NCU ]]; then
    echo "no ncu on this machine"; status=1
  else
    STEP_TAIL=3 step ncu_prefill_4096 480 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      "${ONE[@]}" --input-len 4096
    python3 tools/kernel_time_table.py "$LOGS/ncu_prefill_4096.txt" --layers 32 | tee "$RESULTS/prefill_profile.txt"
    # One prefill attention launch of the second prefill in detail: throughput, occupancy, what warps wait on.
    STEP_TAIL=80 step ncu_prefill_attention 300 "$NCU" --clock-control none --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      -k regex:prefill_attention_kernel -s 48 -c 1 "${ONE[@]}" --input-len 4096
    cp "$LOGS/ncu_prefill_attention.txt" "$RESULTS/prefill_attention_ncu.txt"
  fi
fi
pack_logs
exit $status
