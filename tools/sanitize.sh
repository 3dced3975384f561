#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer, in a build of its
# own (build-asan, no CUDA backend: the CUDA tests skip anyway without a GPU). Fails on any
# test failure, and on any sanitizer report in a test's output, CAF's own (an empty argument
# tuple it dereferences when spawning an actor without arguments) excepted.
# About 25 min to build and 12 min to test on the 2-core machine.
#   tools/sanitize.sh [ctest args...]      e.g. tools/sanitize.sh -R Speculative
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-asan}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAERIE_WITH_CUDA=OFF -DAERIE_SANITIZE=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
# Leaks are not checked: CAF 0.17 and oneDNN keep process-lifetime allocations.
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 1500 "$@" || status=$?
log="$BUILD_DIR/Testing/Temporary/LastTest.log"
# A report whose first frames are in CAF's init_fun_factory.hpp is CAF's own.
reports=$(awk '/ERROR: AddressSanitizer|runtime error:/ { if (r != "" && !caf) print r; r = $0; caf = ($0 ~ /init_fun_factory/); n = 0; next }
               r != "" && n < 4 { n++; if ($0 ~ /init_fun_factory/) caf = 1 }
               END { if (r != "" && !caf) print r }' "$log")
if [[ -n "$reports" ]]; then
  echo "sanitizer reports in passing tests ($log):"
  echo "$reports" | sort | uniq -c
  status=1
fi
exit $status
