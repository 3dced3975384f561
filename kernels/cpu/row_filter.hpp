#pragma once
// The sampling filter of the CPU backend, shared by plain sampling (sampling.cpp) and
// speculative acceptance (tree_accept.cpp) so that both filter and draw alike, and as the
// CUDA kernels do (kernels/cuda/sampling_common.cuh): softmax(row / temperature), then top-k,
// top-p and min-p as one probability threshold tau (the kept set is {p >= tau}), and a draw
// that walks the kept tokens in id order. No sort of the vocabulary: only top-p sorts, and
// only its head (the largest 1024 probabilities) unless they fall short.
#include <cstdint>
#include <vector>

namespace aerie::kernels::cpu {

struct RowFilter {
  float mx = 0.0f;     // the row's maximum
  int32_t argmax = 0;  // its lowest index
  float tau = 0.0f;    // kept: p >= tau (at most the largest p: the argmax always survives)
  float kept = 0.0f;   // the kept mass
};

// The first index of the row's largest value (NaNs never win unless at index 0; ties keep the
// lowest index): the scalar loop's answer, found with vector compares where the CPU has them.
int32_t row_argmax(const float* row, int64_t n);

// The filter of one logits row. Greedy rows (temperature <= 0) get only mx and argmax. Other
// rows also leave every token's probability, expf((x - mx) / temperature) / sum, in `probs`
// (resized to vocab).
RowFilter row_filter(const float* row, int64_t vocab, float temperature, float top_p, int32_t top_k, float min_p, std::vector<float>& probs);

// A draw in id order from the kept tokens not in `removed`: the first whose running mass
// exceeds u * left (u in [0, 1)); rounding at the top end gives the last kept token, and a
// row with nothing left its argmax.
int32_t draw_in_id_order(const std::vector<float>& probs, const RowFilter& f, const std::vector<int32_t>& removed, float u, float left);

}  // namespace aerie::kernels::cpu
