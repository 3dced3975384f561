#pragma once
// aerie-bench gemm-tuning: what a model's products of 17-256 rows cost the first time each row
// count comes (cuBLASLt's candidates timed, or the bucket's algorithm reused: kernels/gemm_tuning.hpp)
// soon afterwards (`steady`: borrowed algorithms still in use), and once each row count has recurred
// gemm_retune_after() times (`settled`: borrowed ones timed for themselves). Run it twice, with
// and without AERIE_GEMM_LT_BUCKETS=0, to compare.
#include <cstdint>
#include <string>
#include <vector>

namespace aerie::launch {

struct GemmTuningBenchOptions {
  std::string model_shape = "llama-3.1-8b";
  int64_t min_rows = 17, max_rows = 256;  // every row count between, in a seeded random order
  uint32_t seed = 1;
  int reps = 20;                 // timed repetitions per row count afterwards (the median counts)
  std::string json_path;
};

int run_gemm_tuning_bench(const GemmTuningBenchOptions& options);

}  // namespace aerie::launch
