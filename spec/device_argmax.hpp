#pragma once
// DeviceArgmax: each row's greedy token, written to a device buffer in stream order (no host
// synchronisation, capturable in a CUDA graph): the sampling kernel with every row at
// temperature 0 over fixed parameter buffers.
#include <cstdint>

#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::spec {

class DeviceArgmax {
 public:
  DeviceArgmax(Device device, int64_t max_rows);
  // out[r] = argmax(logits[r]) for the logits' rows (at most max_rows); out: [rows] i32 (or
  // [rows, 1]). With id_map ([vocab] i32, e.g. a draft vocabulary's target ids) out[r] =
  // id_map[argmax]; with out_copy the same ids are written there too (same launches).
  void run(const TensorView& logits, const TensorView& out, const Stream& stream, const TensorView& id_map = {},
           const TensorView& out_copy = {});

 private:
  int64_t max_rows_;
  Buffer params_;  // zeros, read as f32 / i32 / i64 per parameter
  Buffer top_p_;   // ones
  Buffer workspace_;
};

}  // namespace aerie::spec
