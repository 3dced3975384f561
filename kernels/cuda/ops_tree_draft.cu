// kernels::tree_draft_begin / tree_draft_expand on the GPU, as the CPU reference
// (kernels/cpu/tree_draft.cpp) does them: one block per request for the expansion (every
// expansion's rank counted against all k^2, so ties keep creation order without a sort).
// Graph-safe: no host work.
#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

namespace {

constexpr int kThreads = 256;

// Raw pointers of a frontier and a candidate table (TensorView's accessors are host code).
struct Frontier {
  int32_t* tokens;
  float* scores;
  int32_t* nodes;
  int32_t* sources;
};
Frontier raw(const TreeFrontier& f) { return {f.tokens.ptr<int32_t>(), f.scores.ptr<float>(), f.nodes.ptr<int32_t>(), f.sources.ptr<int32_t>()}; }
struct Candidates {
  int32_t* tokens;
  float* scores;
  int32_t* parents;
  int64_t cols;
};
Candidates raw(const TreeCandidates& c) { return {c.tokens.ptr<int32_t>(), c.scores.ptr<float>(), c.parents.ptr<int32_t>(), c.tokens.dim(1)}; }
// Forward `step`'s contexts and the next forward's (next_indptr null after the last).
struct Contexts {
  const int32_t* indptr;
  const int32_t* indices;
  const int32_t* next_indptr;
  int32_t* next_indices;
};

__device__ __forceinline__ float rank_key(float s) { return isnan(s) ? -INFINITY : s; }
__device__ __forceinline__ bool ranks_before(float sa, int a, float sb, int b) {
  return rank_key(sa) > rank_key(sb) || (rank_key(sa) == rank_key(sb) && a < b);
}

__global__ void tree_draft_begin_kernel(const int32_t* rows, const int32_t* top_tokens, const float* top_logp, int64_t batch, int k,
                                        Frontier f, Candidates c) {
  const int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n >= batch * k) return;
  const int64_t b = n / k, col = n % k, row = rows[b];
  const int32_t token = top_tokens[row * k + col];
  const float logp = top_logp[row * k + col];
  f.tokens[n] = token;
  f.scores[n] = logp;
  f.nodes[n] = static_cast<int32_t>(col);
  f.sources[n] = static_cast<int32_t>(row);
  c.tokens[b * c.cols + col] = token;
  c.scores[b * c.cols + col] = logp;
  c.parents[b * c.cols + col] = -1;
}

__global__ void tree_draft_expand_kernel(const int32_t* child_tokens, const float* child_logp, int k, int64_t step, Frontier f, Candidates c,
                                         Contexts ctx) {
  __shared__ float score[kMaxTopK * kMaxTopK];
  __shared__ int32_t old_nodes[kMaxTopK];
  const int64_t b = blockIdx.x, base = k + (step - 1) * static_cast<int64_t>(k) * k;
  const int kk = k * k;
  for (int i = threadIdx.x; i < k; i += blockDim.x) old_nodes[i] = f.nodes[b * k + i];
  for (int e = threadIdx.x; e < kk; e += blockDim.x) {
    const int64_t child = (b * k + e / k) * k + e % k;
    const float s = f.scores[b * k + e / k] + child_logp[child];
    score[e] = s;
    c.tokens[b * c.cols + base + e] = child_tokens[child];
    c.scores[b * c.cols + base + e] = s;
  }
  __syncthreads();  // every read of the old frontier is done before it is overwritten
  for (int e = threadIdx.x; e < kk; e += blockDim.x) {
    c.parents[b * c.cols + base + e] = old_nodes[e / k];
    int rank = 0;
    const float s = score[e];
    for (int o = 0; o < kk; ++o) rank += ranks_before(score[o], o, s, e) ? 1 : 0;
    if (rank >= k) continue;
    const int64_t n = b * k + rank, parent = b * k + e / k;
    f.tokens[n] = child_tokens[parent * k + e % k];
    f.scores[n] = s;
    f.nodes[n] = static_cast<int32_t>(base + e);
    f.sources[n] = static_cast<int32_t>(parent);
    if (!ctx.next_indptr) continue;
    // The parent's path and own slot: the last `step` entries of its context.
    const int32_t* from = ctx.indices + ctx.indptr[parent + 1] - step;
    int32_t* to = ctx.next_indices + ctx.next_indptr[n + 1] - step - 1;
    for (int64_t i = 0; i < step; ++i) to[i] = from[i];
  }
}

}  // namespace

Status tree_draft_begin(const TreeDraftBeginParams& p, void* stream) {
  const int64_t batch = p.rows.dim(0), k = p.top_tokens.dim(1);
  if (batch == 0) return Status::ok();
  const auto blocks = static_cast<unsigned>((batch * k + kThreads - 1) / kThreads);
  tree_draft_begin_kernel<<<blocks, kThreads, 0, as_stream(stream)>>>(p.rows.ptr<int32_t>(), p.top_tokens.ptr<int32_t>(), p.top_logp.ptr<float>(),
                                                                      batch, static_cast<int>(k), raw(p.frontier), raw(p.candidates));
  return launch_status("tree_draft_begin");
}

Status tree_draft_expand(const TreeDraftExpandParams& p, void* stream) {
  const int64_t k = p.child_tokens.dim(1), batch = p.child_tokens.dim(0) / k;
  if (batch == 0) return Status::ok();
  const Contexts ctx{p.kv_indptr.ptr<int32_t>(), p.kv_indices.ptr<int32_t>(), p.next_kv_indptr.ptr<int32_t>(), p.next_kv_indices.ptr<int32_t>()};
  tree_draft_expand_kernel<<<static_cast<unsigned>(batch), kThreads, 0, as_stream(stream)>>>(
      p.child_tokens.ptr<int32_t>(), p.child_logp.ptr<float>(), static_cast<int>(k), p.step, raw(p.frontier), raw(p.candidates), ctx);
  return launch_status("tree_draft_expand");
}

}  // namespace aerie::kernels::cuda
