// kernels::tree_accept on the GPU: one block per logits row computes the row's statistics
// (argmax; for sampled requests the normaliser, the kept threshold and mass, exactly as
// sample_kernel filters), then one block per request walks its tree on thread 0 and, when
// no child is accepted, draws the bonus with the whole block. Graph-safe: no host work.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sampling_common.cuh"
#include "kernels/philox.hpp"

namespace aerie::kernels::cuda {

namespace {

constexpr int kThreads = 1024;
// Per-row statistics in the workspace: max logit, argmax (int bits), 1/temperature, 1/z,
// threshold tau and kept mass (kTreeAcceptStatsPerRow floats a row, the last two unused).
constexpr int64_t kStats = kTreeAcceptStatsPerRow;
static_assert(kStats >= 6, "six statistics per row");

struct RowStats {
  float mx, inv_t, inv_z, tau, kept;
  int32_t argmax;
  __device__ float prob(float x) const { return __expf((x - mx) * inv_t) * inv_z; }
};
__device__ RowStats load_stats(const float* ws, int64_t row) {
  const float* s = ws + row * kStats;
  return RowStats{s[0], s[2], s[3], s[4], s[5], __float_as_int(s[1])};
}

__global__ void tree_row_stats_kernel(const float* logits, int64_t vocab, int64_t nodes, const float* temperature, const float* top_p,
                                      const int32_t* top_k, const float* min_p, float* ws) {
  __shared__ float scratch[32];
  __shared__ ArgMax am_scratch[32];
  const int64_t r = blockIdx.x, b = r / nodes;
  const float* row = logits + r * vocab;
  ArgMax best{-INFINITY, -1};
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) best = better(best, ArgMax{row[v], static_cast<int32_t>(v)});
  best = block_argmax(best, am_scratch);
  float* out = ws + r * kStats;
  const float temp = temperature[b];
  if (!(temp > 0.0f)) {
    if (threadIdx.x == 0) out[0] = best.v, out[1] = __int_as_float(best.i < 0 ? 0 : best.i);
    return;
  }
  const float mx = best.v, inv_t = 1.0f / temp;
  const RowFilter f = row_filter(row, vocab, mx, inv_t, top_k[b], top_p[b], min_p[b], scratch);
  const float inv_z = f.inv_z, tau = f.tau;
  float kept = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float p = __expf((row[v] - mx) * inv_t) * inv_z;
    if (p >= tau) kept += p;
  }
  kept = block_sum(kept, scratch);
  if (threadIdx.x == 0) {
    out[0] = mx;
    out[1] = __int_as_float(best.i < 0 ? 0 : best.i);
    out[2] = inv_t;
    out[3] = inv_z;
    out[4] = tau;
    out[5] = kept;
  }
}

// Removed tokens (rejected siblings) live in shared memory; a node has at most nodes - 1
// children, and the op entry caps nodes at kMaxNodes.
constexpr int kMaxNodes = 1024;

__global__ void tree_walk_kernel(const float* logits, int64_t vocab, int64_t nodes, const int32_t* tokens, const int32_t* parents,
                                 const float* temperature, const int64_t* seed, const int64_t* step, const float* ws, int32_t* path,
                                 int32_t* bonus) {
  __shared__ int32_t removed[kMaxNodes];
  __shared__ int32_t n_removed, draw_row;
  __shared__ float draw_u, draw_left;
  __shared__ float chunk_sums[kThreads];
  __shared__ float scratch[32];
  __shared__ ArgMax am_scratch[32];
  __shared__ int32_t chosen;
  const int64_t b = blockIdx.x;
  const int32_t* tok = tokens + b * nodes;
  const int32_t* par = parents + b * nodes;
  int32_t* out_path = path + b * nodes;
  if (threadIdx.x == 0) {
    const bool greedy = !(temperature[b] > 0.0f);
    const auto s = static_cast<uint64_t>(seed[b]);
    const auto first_step = static_cast<uint64_t>(step[b]);
    int32_t node = 0, accepted = 0;
    draw_row = -1;
    for (uint64_t depth = 0;; ++depth) {
      const int64_t r = b * nodes + node;
      const RowStats st = load_stats(ws, r);
      const float* row = logits + r * vocab;
      int32_t next = -1;
      float left = st.kept;
      int32_t nr = 0;
      uint64_t sibling = 0;
      for (int32_t c = node + 1; c < nodes && next < 0; ++c) {
        if (par[c] != node) continue;
        const int32_t d = tok[c];
        if (greedy) {
          if (d == st.argmax) next = c;
          continue;
        }
        float pd = 0.0f;
        if (d >= 0 && d < vocab) {
          const float p = st.prob(row[d]);
          pd = p >= st.tau ? p : 0.0f;
        }
        const float u = philox_uniform_inline(s ^ kTreeAcceptStream ^ (sibling++ * kTreeSiblingStride), first_step + depth);
        if (left > 0.0f && u * left < pd) {
          next = c;
        } else if (pd > 0.0f) {
          removed[nr++] = d;
          left -= pd;
        }
      }
      if (next < 0) {
        if (greedy) {
          bonus[b] = st.argmax;
        } else {
          draw_row = static_cast<int32_t>(r);
          draw_u = philox_uniform_inline(s, first_step + depth);
          draw_left = left;
          n_removed = nr;
        }
        break;
      }
      out_path[accepted++] = next;
      node = next;
    }
    for (int32_t i = accepted; i < nodes; ++i) out_path[i] = -1;
  }
  __syncthreads();
  if (draw_row < 0) return;
  // The bonus: a draw in id order (as sample_kernel draws) from the kept tokens not removed,
  // u scaled by the mass left; nothing left (rounding): the argmax.
  const RowStats st = load_stats(ws, draw_row);
  const float* row = logits + static_cast<int64_t>(draw_row) * vocab;
  auto eligible = [&](int64_t v, float p) {
    if (p < st.tau) return false;
    for (int32_t i = 0; i < n_removed; ++i)
      if (removed[i] == v) return false;
    return true;
  };
  const int32_t token = draw_in_id_order(
      vocab, [&](int64_t v) { return st.prob(row[v]); }, eligible, [&](float) { return draw_u * draw_left; }, chunk_sums, scratch,
      am_scratch, &chosen);
  if (threadIdx.x == 0) bonus[b] = token >= 0 ? token : st.argmax;
}

// kernels::greedy_chain_accept: a thread per request (a few per batch; the walk is n - 1
// comparisons).
__global__ void greedy_chain_accept_kernel(const int32_t* drafts, const int32_t* argmax, int64_t batch, int64_t n, int64_t rows,
                                           int32_t* last_rows, int32_t* tokens) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < rows; b += int64_t{gridDim.x} * blockDim.x) {
    if (b >= batch) {
      last_rows[b] = static_cast<int32_t>(b * n + n - 1);
      for (int64_t j = 0; j < n; ++j) tokens[b * n + j] = 0;
      continue;
    }
    int64_t a = 0;
    while (a < n - 1 && drafts[b * n + a + 1] == argmax[b * n + a]) ++a;
    last_rows[b] = static_cast<int32_t>(b * n + a);
    for (int64_t j = 0; j < n; ++j) tokens[b * n + j] = argmax[b * n + j];
  }
}

}  // namespace

Status greedy_chain_accept(const GreedyChainAcceptParams& p, void* stream) {
  const int64_t n = p.tokens_per_request, rows = p.last_rows.dim(0);
  if (rows == 0) return Status::ok();
  greedy_chain_accept_kernel<<<static_cast<unsigned>(std::min<int64_t>((rows + 127) / 128, 1024)), 128, 0, as_stream(stream)>>>(
      p.drafts.ptr<int32_t>(), p.argmax.ptr<int32_t>(), p.drafts.dim(0) / n, n, rows, p.last_rows.ptr<int32_t>(), p.tokens.ptr<int32_t>());
  return launch_status("greedy_chain_accept");
}

Status tree_accept(const TreeAcceptParams& p, void* stream) {
  const int64_t batch = p.tokens.dim(0), nodes = p.tokens.dim(1), vocab = p.logits.dim(1);
  if (batch == 0) return Status::ok();
  if (nodes > kMaxNodes) return Status::error("tree_accept: at most " + std::to_string(kMaxNodes) + " nodes per tree");
  float* ws = p.workspace.ptr<float>();
  tree_row_stats_kernel<<<static_cast<unsigned>(batch * nodes), kThreads, 0, as_stream(stream)>>>(
      p.logits.ptr<float>(), vocab, nodes, p.temperature.ptr<float>(), p.top_p.ptr<float>(), p.top_k.ptr<int32_t>(), p.min_p.ptr<float>(), ws);
  tree_walk_kernel<<<static_cast<unsigned>(batch), kThreads, 0, as_stream(stream)>>>(
      p.logits.ptr<float>(), vocab, nodes, p.tokens.ptr<int32_t>(), p.parents.ptr<int32_t>(), p.temperature.ptr<float>(),
      p.seed.ptr<int64_t>(), p.step.ptr<int64_t>(), ws, p.path.ptr<int32_t>(), p.bonus.ptr<int32_t>());
  return launch_status("tree_accept");
}

}  // namespace aerie::kernels::cuda
