#!/usr/bin/env bash
# On the GPU machine: puts SmolLM2's GGUF together at .device_model/smollm2.gguf from the parts
# carried over several device calls (a call carries 64 MiB with the working tree; the file is
# 98 MB), checks it against .device_model/smollm2.gguf.sha256 and prints its path. The parts are
# either the file cut with `split` (smollm2.gguf.part_*) or its xz stream cut the same way
# (smollm2.gguf.xz.part_*: 90.5 MB, ~5 MiB less to carry, so the binaries, the GGUF and the head
# fit in three calls); xz is read with Python's lzma (the device image has no xz tool for sure).
# Here, before the calls:
#   G=~/.cache/aerie/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf; mkdir -p .device_model
#   xz -T2 -6 -c $G | split -b 24000000 - .device_model/smollm2.gguf.xz.part_   # or split -b ... $G .device_model/smollm2.gguf.part_
#   sha256sum $G | cut -d" " -f1 > .device_model/smollm2.gguf.sha256
# and carry each part as its own path (a carried path replaces only itself there). What worked in
# the thirty-sixth session (the tool counts the working tree too: 66.5 MB in one call was refused):
# parts of 20,000,000 / 54,000,000 / the rest (head -c, tail -c), carried as (1) .device.tgz +
# part_aa + the .sha256, (2) part_ab, (3) part_ac + .device_model/v10.
# Exit 1, with the reason on stderr, when parts are missing or the sum differs.
set -uo pipefail
cd "$(dirname "$0")/.."
M=$PWD/.device_model/smollm2.gguf
SUM=.device_model/smollm2.gguf.sha256
[[ -f $SUM ]] || { echo "device_model_gguf: no $SUM" >&2; exit 1; }
check() { echo "$(cut -d' ' -f1 "$SUM")  $M" | sha256sum -c --quiet >&2; }
if [[ -f $M ]] && check 2>/dev/null; then echo "$M"; exit 0; fi
if compgen -G ".device_model/smollm2.gguf.xz.part_*" >/dev/null; then
  cat .device_model/smollm2.gguf.xz.part_* | python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)' > "$M" \
    || { echo "device_model_gguf: the xz parts do not decompress (one missing?)" >&2; rm -f "$M"; exit 1; }
elif compgen -G ".device_model/smollm2.gguf.part_*" >/dev/null; then
  cat .device_model/smollm2.gguf.part_* > "$M"
else
  echo "device_model_gguf: no parts under .device_model" >&2; exit 1
fi
check || { echo "device_model_gguf: $M does not match $SUM (a part missing or cut short?)" >&2; rm -f "$M"; exit 1; }
echo "$M"
