// CPU backend of kernels::tree_accept: the same walk as the CUDA kernel, with the row
// filter (maximum, normaliser, kept threshold and mass: row_filter.hpp, as plain sampling)
// computed only for the rows the walk visits.
#include <algorithm>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/cpu/row_filter.hpp"
#include "kernels/philox.hpp"

namespace aerie::kernels::cpu {

Status tree_accept(const TreeAcceptParams& p) {
  const int64_t batch = p.tokens.dim(0), nodes = p.tokens.dim(1), vocab = p.logits.dim(1);
  std::vector<float> probs;
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t* tokens = p.tokens.ptr<int32_t>() + b * nodes;
    const int32_t* parents = p.parents.ptr<int32_t>() + b * nodes;
    int32_t* path = p.path.ptr<int32_t>() + b * nodes;
    std::fill(path, path + nodes, -1);
    const float temperature = p.temperature.ptr<float>()[b];
    const auto seed = static_cast<uint64_t>(p.seed.ptr<int64_t>()[b]);
    const auto first_step = static_cast<uint64_t>(p.step.ptr<int64_t>()[b]);
    int32_t node = 0, accepted = 0;
    for (uint64_t depth = 0;; ++depth) {
      const float* row = p.logits.ptr<float>() + (b * nodes + node) * vocab;
      const RowFilter s = row_filter(row, vocab, temperature, p.top_p.ptr<float>()[b], p.top_k.ptr<int32_t>()[b], p.min_p.ptr<float>()[b], probs);
      int32_t next = -1;
      std::vector<int32_t> removed;
      float left = s.kept;
      uint64_t sibling = 0;
      for (int32_t c = node + 1; c < nodes && next < 0; ++c) {
        if (parents[c] != node) continue;
        const int32_t d = tokens[c];
        if (!(temperature > 0.0f)) {
          if (d == s.argmax) next = c;
          continue;
        }
        const float pd = (d >= 0 && d < vocab && probs[static_cast<size_t>(d)] >= s.tau) ? probs[static_cast<size_t>(d)] : 0.0f;
        const float u = philox_uniform_inline(seed ^ kTreeAcceptStream ^ (sibling++ * kTreeSiblingStride), first_step + depth);
        if (left > 0.0f && u * left < pd) {
          next = c;
        } else if (pd > 0.0f) {  // rejected: the next sibling and the bonus see the rest
          removed.push_back(d);
          left -= pd;
        }
      }
      if (next < 0) {
        p.bonus.ptr<int32_t>()[b] = temperature > 0.0f ? draw_in_id_order(probs, s, removed, philox_uniform_inline(seed, first_step + depth), left) : s.argmax;
        break;
      }
      path[accepted++] = next;
      node = next;
    }
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
