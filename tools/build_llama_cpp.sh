#!/usr/bin/env bash
# Builds llama.cpp's CPU benchmarks (llama-bench, llama-batched-bench, llama-quantize), the
# CPU peer of tools/cpu_vs_transformers.sh (issue #21 item 5). No registry or git remote is
# needed: PyPI's llama-cpp-python sdist carries llama.cpp's source (vendor/llama.cpp), so
# the version is pinned by that package's. Prints the directory holding the binaries.
#   tools/build_llama_cpp.sh            # -> /root/.cache/aerie/llama.cpp-<version>/build/bin
# Env: LLAMA_CPP_PYTHON_VERSION (0.3.36), LLAMA_CPP_CACHE (/root/.cache/aerie).
set -euo pipefail
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
CACHE=${LLAMA_CPP_CACHE:-/root/.cache/aerie}
ROOT="$CACHE/llama.cpp-$VERSION"
BIN="$ROOT/build/bin"
if [[ -x "$BIN/llama-bench" && -x "$BIN/llama-batched-bench" && -x "$BIN/llama-quantize" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$ROOT"
if [[ ! -f "$ROOT/src/CMakeLists.txt" ]]; then
  pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$ROOT/sdist" >&2
  tar xzf "$ROOT/sdist/llama_cpp_python-$VERSION.tar.gz" -C "$ROOT/sdist"
  rm -rf "$ROOT/src"
  mv "$ROOT/sdist/llama_cpp_python-$VERSION/vendor/llama.cpp" "$ROOT/src"
  rm -rf "$ROOT/sdist"
fi
# CPU only, tuned for this CPU (GGML_NATIVE), as llama.cpp's own build instructions do.
cmake -S "$ROOT/src" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
ninja -C "$ROOT/build" llama-bench llama-batched-bench llama-quantize >&2
echo "$BIN"
