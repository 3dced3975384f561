#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/cpu/parallel_for.hpp"
#include "kernels/cpu/row_filter.hpp"
#include "kernels/philox.hpp"

namespace aerie::kernels {

float philox_uniform(uint64_t seed, uint64_t step) { return philox_uniform_inline(seed, step); }

namespace cpu {

// Each row: the shared filter (row_filter.hpp: softmax with temperature, top-k / top-p /
// min-p as one threshold) and a draw in id order with u = Philox(seed, step), as the CUDA
// kernel and speculative acceptance draw. Rows run in parallel, each on its own buffer.
Status sample(const SampleParams& p) {
  const int64_t batch = p.logits.dim(0), vocab = p.logits.dim(1);
  for (int64_t b = 0; b < batch; ++b) {
    const float temp = p.temperature.ptr<float>()[b], top_p = p.top_p.ptr<float>()[b], min_p = p.min_p.ptr<float>()[b];
    if (!(temp >= 0.0f) || !std::isfinite(temp)) return Status::error("temperature must be a finite number >= 0");
    if (!(top_p > 0.0f && top_p <= 1.0f)) return Status::error("top_p must be in (0, 1]");
    if (!(min_p >= 0.0f && min_p <= 1.0f)) return Status::error("min_p must be in [0, 1]");
  }
  parallel_for(batch, 8 * vocab, [&](int64_t b) {
    thread_local std::vector<float> probs;
    const float* row = p.logits.ptr<float>() + b * vocab;
    const float temp = p.temperature.ptr<float>()[b];
    const RowFilter f = row_filter(row, vocab, temp, p.top_p.ptr<float>()[b], p.top_k.ptr<int32_t>()[b], p.min_p.ptr<float>()[b], probs);
    int32_t token = f.argmax;
    if (temp != 0.0f) {
      const float u = kernels::philox_uniform(static_cast<uint64_t>(p.seed.ptr<int64_t>()[b]), static_cast<uint64_t>(p.step.ptr<int64_t>()[b]));
      token = draw_in_id_order(probs, f, {}, u, f.kept);
    }
    if (p.id_map.defined()) token = p.id_map.ptr<int32_t>()[token];
    p.out.ptr<int32_t>()[b] = token;
    if (p.out_copy.defined()) p.out_copy.ptr<int32_t>()[b] = token;
  });
  return Status::ok();
}

Status log_softmax(const LogSoftmaxParams& p) {
  const int64_t batch = p.logits.dim(0), vocab = p.logits.dim(1);
  for (int64_t b = 0; b < batch; ++b) {
    const float* row = p.logits.ptr<float>() + b * vocab;
    const float mx = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    for (int64_t v = 0; v < vocab; ++v) p.out.ptr<float>()[b * vocab + v] = row[v] - lse;
  }
  return Status::ok();
}

}  // namespace cpu
}  // namespace aerie::kernels
