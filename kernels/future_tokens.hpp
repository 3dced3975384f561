#pragma once
// Overlap scheduling's future tokens on the device (sglang's future map): the Scheduler
// plans batch N + 1 while N runs, so a decode in N + 1 names the token N samples for its
// request by a slot of a device table instead (input id -(slot + 1), never a vocabulary
// id). N records its tokens into the table when it has sampled them, and N + 1 resolves
// its ids from the table before its forward reads them: both in stream order, so the host
// never waits for N's tokens before it enqueues N + 1.
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// In place: ids[t] < 0 becomes table[-ids[t] - 1]; other ids stay. A slot outside the table
/// is an error (CPU); the CUDA kernel leaves such an id as it is (the host checked the slots).
struct ResolveFutureIdsParams {
  TensorView ids;    // [tokens] i32
  TensorView table;  // [slots] i32
  void validate() const;
};
Status resolve_future_ids(const ResolveFutureIdsParams& p, const Stream& stream);

/// table[slots[i]] = tokens[i] for every slots[i] >= 0 (a row of -1 keeps nothing). Slots
/// are distinct; one outside the table is an error (CPU) or skipped (CUDA).
struct RecordFutureTokensParams {
  TensorView tokens;  // [rows] i32
  TensorView slots;   // [rows] i32
  TensorView table;   // [slots] i32
  void validate() const;
};
Status record_future_tokens(const RecordFutureTokensParams& p, const Stream& stream);

}  // namespace aerie::kernels
