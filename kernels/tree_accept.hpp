#pragma once
#include <cstdint>

#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// Verification of draft trees (a chain is a tree whose nodes have one child each), one
/// request per tree, on the logits' device: nothing of the vocabulary crosses to the host.
/// Walking from the root, at node n (logits row b * nodes + n):
///  - temperature == 0 (greedy): the child whose token is the row's argmax (ties to the
///    lowest id) is accepted; with none, the argmax is the bonus token.
///  - otherwise the row's processed distribution q is the one kernels::sample draws from
///    (softmax(logits / temperature), then top-k, top-p and min-p as probability thresholds,
///    renormalised). The children are tried in index order: child c with token d is accepted
///    when u_j * left < q(d), where left is the mass of q not yet removed and u_j the j-th
///    sibling's uniform number; a rejected d is removed from q. With no child accepted the
///    bonus is drawn from what is left of q. Every committed token is therefore distributed
///    exactly as plain sampling from the target would draw it (target-only speculative
///    sampling). Uniform numbers: philox_uniform(seed ^ kTreeAcceptStream ^ j *
///    kTreeSiblingStride, step + depth) for the tests, philox_uniform(seed, step + depth) for
///    the bonus, so a seeded request draws the same numbers in any batch.
/// Rows of greedy requests and sampled requests may be mixed in one call.
struct TreeAcceptParams {
  TensorView logits;       // [batch * nodes, vocab] f32
  TensorView tokens;       // [batch, nodes] i32: draft tokens (node 0, the root, is not tested)
  TensorView parents;      // [batch, nodes] i32: parents[0] = -1, 0 <= parents[i] < i
  TensorView temperature;  // [batch] f32 >= 0
  TensorView top_p;        // [batch] f32 in (0, 1]
  TensorView top_k;        // [batch] i32 (<= 0: no limit)
  TensorView min_p;        // [batch] f32 in [0, 1]
  TensorView seed;         // [batch] i64
  TensorView step;         // [batch] i64: tokens the request has output before this verify
  TensorView path;         // out [batch, nodes] i32: accepted nodes root to leaf (root excluded), then -1
  TensorView bonus;        // out [batch] i32: the token after the accepted nodes
  TensorView workspace;    // [>= tree_accept_workspace_floats(batch * nodes)] f32 (per-row statistics)
  void validate() const;
};
// Floats of row statistics per logits row in the workspace (the CUDA backend's layout).
inline constexpr int64_t kTreeAcceptStatsPerRow = 8;
inline int64_t tree_accept_workspace_floats(int64_t rows) { return rows * kTreeAcceptStatsPerRow; }
Status tree_accept(const TreeAcceptParams& p, const Stream& stream);

inline constexpr uint64_t kTreeAcceptStream = 0xA5A5A5A5DEADBEEFull;
inline constexpr uint64_t kTreeSiblingStride = 0x9E3779B97F4A7C15ull;

}  // namespace aerie::kernels
