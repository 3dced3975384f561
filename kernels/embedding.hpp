#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// out[t] = table[ids[t] - first_id]. An id outside the table ([first_id, first_id + rows))
/// is an error (CPU) and is never read; with `zero_outside` it gives a row of zeros instead
/// (a vocab-parallel shard: the rank holding the id supplies it, the others add zeros).
struct EmbeddingParams {
  TensorView ids;    // [tokens] i32
  TensorView table;  // [rows, hidden] f32|bf16|f16, or i32 (an id map: out i32, copied exactly)
  TensorView out;    // [tokens, hidden] f32|bf16|f16 (i32 with an i32 table)
  int64_t first_id = 0;       // the id of table row 0
  bool zero_outside = false;  // ids outside the table give zeros (else an error)
  void validate() const;
};
Status embedding(const EmbeddingParams& p, const Stream& stream);

/// The other way: out[rows[i]] = src[i] (rows distinct, inside out), the rest of out untouched;
/// a row copied as is (same dtype: floating or i32). Keeps per-request state rows on the device.
struct ScatterRowsParams {
  TensorView src;   // [n, width]
  TensorView rows;  // [n] i32
  TensorView out;   // [rows_out, width]
  void validate() const;
};
Status scatter_rows(const ScatterRowsParams& p, const Stream& stream);

}  // namespace aerie::kernels
