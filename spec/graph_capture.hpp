#pragma once
// One CUDA graph of what `enqueue` puts on the stream, as every graph runner captures it:
// once eagerly first (cuBLAS picks its kernels, cuBLASLt times its algorithms for each row count
// exactly, lazily allocated buffers come into being),
// then under capture; a failure ends the capture before it is rethrown.
#include <functional>

#include "kernels/device_runtime.hpp"
#include "kernels/gemm_tuning.hpp"
#include "kernels/staging.hpp"
#include "kernels/stream.hpp"

namespace aerie::spec {

inline void* capture_graph(const Stream& stream, const std::function<void()>& enqueue) {
  {
    const kernels::ExactGemmTuning exact;  // the graph replays this row count all run long: its own algorithm
    enqueue();
  }
  synchronize(stream);
  cuda_runtime::begin_capture(stream.handle());
  try {
    enqueue();
  } catch (...) {
    cuda_runtime::end_capture(stream.handle());
    throw;
  }
  return cuda_runtime::end_capture(stream.handle());
}

}  // namespace aerie::spec
