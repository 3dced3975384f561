#pragma once
// Greedy acceptance of draft chains on the device, for a draft extend enqueued right behind
// the verify (nothing waits for the host to read the argmax first).
#include <cstdint>

#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// Request b's n verified rows are b * n .. b * n + n - 1: its root, then its n - 1 drafts.
/// Its accepted drafts are those equal to the argmax of the row before them, up to the
/// first that is not (a_b of them; kernels::tree_accept's greedy walk along a chain). Writes
/// the row of its last committed token, last_rows[b] = b * n + a_b, and tokens[b * n + j] =
/// argmax[b * n + j] for every j: its committed tokens (the accepted drafts, then the bonus)
/// for j <= a_b, then what a fixed-width extend pads with. Rows past the drafts' requests
/// (a batch padded to a bucket) get last row b * n + n - 1 and tokens 0.
struct GreedyChainAcceptParams {
  TensorView drafts;            // [batch * n] i32: each request's root, then its drafts
  TensorView argmax;            // [>= batch * n] i32: the verify's greedy token of each row
  int64_t tokens_per_request = 0;  // n >= 1
  TensorView last_rows;         // out [rows >= batch] i32
  TensorView tokens;            // out [rows * n] i32
  void validate() const;
};
Status greedy_chain_accept(const GreedyChainAcceptParams& p, const Stream& stream);

}  // namespace aerie::kernels
