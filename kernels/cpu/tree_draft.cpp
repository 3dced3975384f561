// kernels::tree_draft_begin / tree_draft_expand on the CPU: the reference the CUDA kernels
// (kernels/cuda/ops_tree_draft.cu) follow, request by request.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

namespace {

// Descending score, then creation order; NaN ranks as -inf so every expansion has a rank.
float key(float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; }
bool ranks_before(float sa, int64_t a, float sb, int64_t b) { return key(sa) > key(sb) || (key(sa) == key(sb) && a < b); }

}  // namespace

Status tree_draft_begin(const TreeDraftBeginParams& p) {
  const int64_t k = p.top_tokens.dim(1), batch = p.rows.dim(0), cols = p.candidates.tokens.dim(1);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t row = p.rows.ptr<int32_t>()[b];
    if (row < 0 || row >= p.top_tokens.dim(0)) return Status::error("tree_draft_begin: state row " + std::to_string(row) + " is out of range");
    for (int64_t c = 0; c < k; ++c) {
      const int32_t token = p.top_tokens.ptr<int32_t>()[row * k + c];
      const float logp = p.top_logp.ptr<float>()[row * k + c];
      const int64_t n = b * k + c;
      p.frontier.tokens.ptr<int32_t>()[n] = token;
      p.frontier.scores.ptr<float>()[n] = logp;
      p.frontier.nodes.ptr<int32_t>()[n] = static_cast<int32_t>(c);
      p.frontier.sources.ptr<int32_t>()[n] = static_cast<int32_t>(row);
      p.candidates.tokens.ptr<int32_t>()[b * cols + c] = token;
      p.candidates.scores.ptr<float>()[b * cols + c] = logp;
      p.candidates.parents.ptr<int32_t>()[b * cols + c] = -1;
    }
  }
  return Status::ok();
}

Status tree_draft_expand(const TreeDraftExpandParams& p) {
  const int64_t k = p.child_tokens.dim(1), batch = p.child_tokens.dim(0) / k, cols = p.candidates.tokens.dim(1);
  const int64_t base = k + (p.step - 1) * k * k, step = p.step;
  const int32_t* indptr = p.kv_indptr.ptr<int32_t>();
  const int32_t* indices = p.kv_indices.ptr<int32_t>();
  const bool has_next = p.next_kv_indptr.defined();
  std::vector<float> score(static_cast<size_t>(k * k));
  std::vector<int32_t> old_nodes(static_cast<size_t>(k));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < k; ++f) old_nodes[static_cast<size_t>(f)] = p.frontier.nodes.ptr<int32_t>()[b * k + f];
    for (int64_t e = 0; e < k * k; ++e) {
      const int64_t f = e / k, child = (b * k + f) * k + e % k;
      score[static_cast<size_t>(e)] = p.frontier.scores.ptr<float>()[b * k + f] + p.child_logp.ptr<float>()[child];
      const int64_t at = b * cols + base + e;
      p.candidates.tokens.ptr<int32_t>()[at] = p.child_tokens.ptr<int32_t>()[child];
      p.candidates.scores.ptr<float>()[at] = score[static_cast<size_t>(e)];
      p.candidates.parents.ptr<int32_t>()[at] = old_nodes[static_cast<size_t>(f)];
    }
    for (int64_t e = 0; e < k * k; ++e) {
      int64_t rank = 0;
      for (int64_t o = 0; o < k * k; ++o) rank += ranks_before(score[static_cast<size_t>(o)], o, score[static_cast<size_t>(e)], e) ? 1 : 0;
      if (rank >= k) continue;
      const int64_t f = e / k, n = b * k + rank, parent = b * k + f;
      p.frontier.tokens.ptr<int32_t>()[n] = p.child_tokens.ptr<int32_t>()[parent * k + e % k];
      p.frontier.scores.ptr<float>()[n] = score[static_cast<size_t>(e)];
      p.frontier.nodes.ptr<int32_t>()[n] = static_cast<int32_t>(base + e);
      p.frontier.sources.ptr<int32_t>()[n] = static_cast<int32_t>(parent);
      if (!has_next) continue;
      // The parent's path and own slot: the last `step` entries of its context.
      const int64_t from = indptr[parent + 1] - step, to = p.next_kv_indptr.ptr<int32_t>()[n + 1] - step - 1;
      if (from < indptr[parent] || to < p.next_kv_indptr.ptr<int32_t>()[n] || to + step > p.next_kv_indices.dim(0))
        return Status::error("tree_draft_expand: a context is shorter than the path of step " + std::to_string(step));
      for (int64_t i = 0; i < step; ++i) p.next_kv_indices.ptr<int32_t>()[to + i] = indices[from + i];
    }
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
