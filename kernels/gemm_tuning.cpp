#include "kernels/gemm_tuning.hpp"

#include <atomic>
#include <bit>

#include "kernels/backends.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/error.hpp"

namespace aerie::kernels {

int64_t gemm_tuning_bucket(int64_t m) {
  AERIE_CHECK(m >= 1, "gemm_tuning_bucket: " << m << " rows");
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(m)));
}

namespace {
thread_local int exact_scopes = 0;

std::atomic<int64_t>& retune_after() {
  static std::atomic<int64_t> calls{env_knob_or("AERIE_GEMM_LT_RETUNE_AFTER", static_cast<int>(kGemmRetuneAfterCalls))};
  return calls;
}

std::atomic<bool>& buckets_on() {
  static std::atomic<bool> on{!env_turned_off("AERIE_GEMM_LT_BUCKETS")};
  return on;
}
}  // namespace

int64_t gemm_retune_after() { return retune_after().load(std::memory_order_relaxed); }
void set_gemm_retune_after(int64_t calls) { retune_after().store(calls, std::memory_order_relaxed); }

ExactGemmTuning::ExactGemmTuning() { ++exact_scopes; }
ExactGemmTuning::~ExactGemmTuning() { --exact_scopes; }
bool ExactGemmTuning::active() { return exact_scopes > 0; }

bool gemm_tuning_buckets() { return buckets_on().load(std::memory_order_relaxed); }
void set_gemm_tuning_buckets(bool on) { buckets_on().store(on, std::memory_order_relaxed); }

GemmTuningCounts gemm_tuning_counts() { return cuda::gemm_tuning_counts(); }

}  // namespace aerie::kernels
