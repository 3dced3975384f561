#include "kernels/gemv_rules.hpp"

#include "kernels/env_knob.hpp"

namespace aerie::kernels {

const GemvRules& gemv_rules() {
  static const GemvRules rules = [] {
    GemvRules r;
    r.short_k_on_tensor_cores = !env_turned_off("AERIE_GEMV_SHORT_K_MMA");
    r.short_k_max = env_knob_or("AERIE_GEMV_SHORT_K_MAX", static_cast<int>(r.short_k_max));
    r.short_k_max_two_rows = env_knob_or("AERIE_GEMV_SHORT_K_MAX_TWO_ROWS",
                                         env_knob_or("AERIE_GEMV_SHORT_K_MAX", static_cast<int>(r.short_k_max_two_rows)));
    r.short_k_min_rows = env_knob_or("AERIE_GEMV_SHORT_K_MMA_MIN_N", static_cast<int>(r.short_k_min_rows));
    r.narrow_max_rows = env_knob_or("AERIE_GEMV_NARROW_CUDA_CORE_N", static_cast<int>(r.narrow_max_rows));
    r.tensor_cores = !env_turned_off("AERIE_GEMV_MMA");
    r.chunked_max_rows = env_knob_or("AERIE_GEMV_CHUNKED_MAX_ROWS", static_cast<int>(r.chunked_max_rows));
    r.chunked_max_weight_bytes = static_cast<int64_t>(env_knob_or("AERIE_GEMV_CHUNKED_MAX_MIB", static_cast<int>(r.chunked_max_weight_bytes >> 20))) << 20;
    return r;
  }();
  return rules;
}

GemvKernel small_gemv_kernel(int64_t m, int64_t n, int64_t k, bool fp8_weights, const GemvRules& rules) {
  if (m > 8) return GemvKernel::kTensorCore;
  const bool whole_steps = rules.tensor_cores && k % (fp8_weights ? 64 : 32) == 0;
  if (m <= 2) {
    const bool short_k = rules.short_k_on_tensor_cores && k <= (m == 1 ? rules.short_k_max : rules.short_k_max_two_rows) &&
                         n >= rules.short_k_min_rows;
    return short_k && whole_steps ? GemvKernel::kTensorCore : GemvKernel::kCudaCore;
  }
  if (!fp8_weights && n <= rules.narrow_max_rows) return GemvKernel::kCudaCore;
  return whole_steps ? GemvKernel::kTensorCore : GemvKernel::kCudaCore;
}

GemvKernel batch_invariant_gemv_kernel(int64_t k, bool fp8_weights, const GemvRules& rules) {
  return rules.tensor_cores && k % (fp8_weights ? 64 : 32) == 0 ? GemvKernel::kTensorCore : GemvKernel::kCudaCore;
}

bool gemv_takes_row_chunks(int64_t m, int64_t n, int64_t k, const GemvRules& rules) {
  return m > 16 && m <= rules.chunked_max_rows && n * k * 2 <= rules.chunked_max_weight_bytes && rules.tensor_cores && k % 32 == 0;
}

int64_t batch_invariant_gemv_chunk_rows(GemvKernel kernel, bool fp8_weights) {
  return kernel == GemvKernel::kTensorCore && !fp8_weights ? 16 : 8;
}

}  // namespace aerie::kernels
