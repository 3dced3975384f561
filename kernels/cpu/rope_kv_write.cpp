// The CPU reference of the fused op is the composition it replaces: split, rope, kv_write.
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
  for (int64_t r = 0; r < tokens; ++r) {
    const auto* row = static_cast<const unsigned char*>(p.qkv.data) + r * width * static_cast<int64_t>(es);
    std::memcpy(static_cast<unsigned char*>(p.q_out.data) + r * qh * dim * static_cast<int64_t>(es), row, static_cast<size_t>(qh * dim) * es);
    std::memcpy(k.data() + r * kh * dim * static_cast<int64_t>(es), row + qh * dim * static_cast<int64_t>(es), static_cast<size_t>(kh * dim) * es);
    std::memcpy(v.data() + r * kh * dim * static_cast<int64_t>(es), row + (qh + kh) * dim * static_cast<int64_t>(es), static_cast<size_t>(kh * dim) * es);
  }
  TensorView kv_k(k.data(), t, {tokens, kh, dim}), kv_v(v.data(), t, {tokens, kh, dim});
  Status s = rope({.q = p.q_out, .k = kv_k, .positions = p.positions, .inv_freq = p.inv_freq, .attention_scaling = p.attention_scaling});
  if (!s.is_ok()) return s;
  return kv_write({.k = kv_k, .v = kv_v, .slots = p.slots, .k_cache = p.k_cache, .v_cache = p.v_cache});
}

}  // namespace aerie::kernels::cpu
