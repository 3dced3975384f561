#pragma once
// Random requests for engine tests: n prompts of 1..max_prompt_len token ids in [3, 503) and
// min_new..min_new + new_range - 1 new tokens each, greedy, ignoring EOS. The same seed
// gives the same requests; tests adjust sampling or EOS handling afterwards.
#include <cstdint>
#include <random>
#include <vector>

#include "actors/core/generation_request.hpp"

namespace aerie::testing {

inline std::vector<core::GenerationRequest> random_requests(int n, uint32_t seed, int max_prompt_len, int64_t min_new, int64_t new_range) {
  std::mt19937 rng(seed);
  std::vector<core::GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    core::GenerationRequest r;
    const int len = 1 + static_cast<int>(rng() % static_cast<uint32_t>(max_prompt_len));
    for (int t = 0; t < len; ++t) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 500));
    r.max_new_tokens = min_new + static_cast<int64_t>(rng() % static_cast<uint64_t>(new_range));
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    reqs.push_back(r);
  }
  return reqs;
}

}  // namespace aerie::testing
