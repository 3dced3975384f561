#!/usr/bin/env bash
# On a 2-GPU machine (device kind nvidia-h200-x2), with .device.tgz from tools/device_pack.sh
# carried along: the failure drills on GPUs (tests/launch/drill_test.py), NCCL underneath.
#  - kill_worker: kill -9 rank 1 of TP2 (and of DP replicas and DP attention) mid-stream;
#  - stop_worker: SIGSTOP rank 1;
# each with its promises: clients told within 5 s, /health 503, mpirun non-zero within 30 s,
# no process left behind (no NCCL hang).
#   device run (kind nvidia-h200-x2, carry [".device.tgz"]): bash tools/gpu_drill.sh [drills...]
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS=${OUT:-/tmp/aerie-gpu-drill}
source tools/gpu_steps.sh
drills=${*:-kill_worker stop_worker}
step drills 300 python3 tests/launch/drill_test.py --serve "$B/aerie-serve" --mpirun mpirun --server-flags "--device cuda" \
  --mpirun-flags "-x NCCL_NVLS_ENABLE=0 -x LD_LIBRARY_PATH" $drills
grep '^\[' "$LOGS/drills.txt" > "$RESULTS/drill_summary.txt"
cp /tmp/aerie-drill-*.log "$LOGS/" 2>/dev/null
pack_logs
exit $status
