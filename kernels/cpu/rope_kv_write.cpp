// The CPU reference of the fused op is the composition it replaces: split (undoing the
// pair-adjacent q/k order), rope, kv_write.
#include <cstring>
#include <vector>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status rope_kv_write(const RopeKvWriteParams& p) {
  const int64_t tokens = p.qkv.dim(0), qh = p.q_out.dim(1), kh = p.k_cache.dim(1), dim = p.q_out.dim(2);
  const int64_t width = (qh + 2 * kh) * dim;
  const DType t = p.qkv.dtype;
  const size_t es = dtype_size(t);
  std::vector<unsigned char> k(static_cast<size_t>(tokens * kh * dim) * es), v(k.size());
  const int64_t half = dim / 2;
  // Element offset of dim d of a pair-adjacent head (see rope_kv_write.hpp).
  auto paired = [&](int64_t d) { return d < half ? 2 * d : 2 * (d - half) + 1; };
  const auto* qkv = static_cast<const unsigned char*>(p.qkv.data);
  auto* q_out = static_cast<unsigned char*>(p.q_out.data);
  for (int64_t r = 0; r < tokens; ++r) {
    const int64_t row = r * width;
    // Element copies of one dtype (q_out and the cache rows share the input's): bytes, not a
    // conversion through float and back, which cost a switch per element.
    for (int64_t h = 0; h < qh + kh; ++h) {
      unsigned char* dst = h < qh ? q_out + ((r * qh + h) * dim) * static_cast<int64_t>(es) : k.data() + ((r * kh + h - qh) * dim) * static_cast<int64_t>(es);
      const unsigned char* src = qkv + (row + h * dim) * static_cast<int64_t>(es);
      for (int64_t d = 0; d < dim; ++d) std::memcpy(dst + d * static_cast<int64_t>(es), src + paired(d) * static_cast<int64_t>(es), es);
    }
    std::memcpy(v.data() + r * kh * dim * static_cast<int64_t>(es),
                qkv + (row + (qh + kh) * dim) * static_cast<int64_t>(es),
                static_cast<size_t>(kh * dim) * es);
  }
  TensorView kv_k(k.data(), t, {tokens, kh, dim}), kv_v(v.data(), t, {tokens, kh, dim});
  Status s = rope({.q = p.q_out, .k = kv_k, .positions = p.positions, .inv_freq = p.inv_freq, .attention_scaling = p.attention_scaling});
  if (!s.is_ok()) return s;
  return kv_write({.k = kv_k, .v = kv_v, .slots = p.slots, .k_cache = p.k_cache, .v_cache = p.v_cache});
}

Status qkv_rope(const QkvRopeParams& p) {
  Status s = matmul({.x = p.x, .w = p.w, .bias = p.bias, .w_fp8 = p.w_fp8, .w_scale = p.w_scale, .w_blocks = p.w_blocks, .y = p.qkv});
  if (!s.is_ok()) return s;
  return rope_kv_write({.qkv = p.qkv, .positions = p.positions, .inv_freq = p.inv_freq, .slots = p.slots, .q_out = p.q_out,
                        .k_cache = p.k_cache, .v_cache = p.v_cache, .attention_scaling = p.attention_scaling});
}

}  // namespace aerie::kernels::cpu
