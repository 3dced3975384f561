#!/usr/bin/env bash
# On the GPU machine: the draft extend after a tree verify at the fixed width (one CUDA graph per
# bucket, spec/draft_extend_runner.hpp) against the build before it (eager extend), on SmolLM2 +
# the shipped EAGLE-3 head, interleaved, plus gpu_test's speculative tests on the new build.
#   device run (carry [".device.tgz", ".device_base.tgz"], the GGUF's parts already in
#   .device_model/ as for tools/gpu_eagle3_eval.sh): bash tools/gpu_tree_extend_check.sh
# .device.tgz: BUILD_DIR=build BINS="launch/aerie-generate tests/gpu_test" bash tools/device_pack.sh;
# .device_base.tgz: the same from the build before (BINS=launch/aerie-generate is enough).
# HEAD (default assets/smollm2-eagle3), PROMPTS (default 96), CONFIGS (default "plain chain-3 tree-4x3-8 tree-4x5-8"), ROUNDS (default 2).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aerie-tree-extend}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
M=$(bash tools/device_model_gguf.sh) || exit 1
rm -rf .device .device_base /tmp/before && mkdir -p /tmp/before && tar xzf .device_base.tgz -C /tmp/before && mv /tmp/before/.device .device_base
tar xzf .device.tgz
if [[ -x .device/bin/gpu_test ]]; then
  LD_LIBRARY_PATH=$PWD/.device/lib .device/bin/gpu_test --gtest_filter='*Spec*:*Draft*:*Tree*:*Extend*' 2>&1 | tail -25 | tee "$OUT/gpu_test_spec.txt"
fi
for round in $(seq 1 "${ROUNDS:-2}"); do
  for build in before now; do
    dir=.device; [[ $build == before ]] && dir=.device_base
    LD_LIBRARY_PATH=$PWD/$dir/lib python3 tools/train_eagle3/eval_spec.py --generate $dir/bin/aerie-generate --model "$M" \
      --head "${HEAD:-assets/smollm2-eagle3}" --device cuda --dtype bf16 --prompts ${PROMPTS:-96} --max-new 128 --batch-size 1 8 --temperature 0 \
      --configs ${CONFIGS:-plain chain-3 tree-4x3-8 tree-4x5-8} --json "$OUT/tree_extend_${build}_r${round}.json" | sed "s/^/$build r$round: /"
  done
done
