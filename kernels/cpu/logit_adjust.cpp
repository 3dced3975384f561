#include <string>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status logit_adjust(const LogitAdjustParams& p) {
  const int64_t n = p.ids.dim(0), rows = p.logits.dim(0), vocab = p.logits.dim(1);
  float* logits = p.logits.ptr<float>();
  const int32_t* row = p.rows.ptr<int32_t>();
  const int32_t* id = p.ids.ptr<int32_t>();
  const float* bias = p.bias.ptr<float>();
  const float* rep = p.rep.ptr<float>();
  const float* add = p.add.ptr<float>();
  for (int64_t e = 0; e < n; ++e) {
    if (row[e] < 0 || row[e] >= rows || id[e] < 0 || id[e] >= vocab)
      return Status::error("logit adjustment " + std::to_string(e) + " names row " + std::to_string(row[e]) + ", token " + std::to_string(id[e]) +
                           " outside the logits");
    float& x = logits[static_cast<int64_t>(row[e]) * vocab + id[e]];
    x += bias[e];
    if (rep[e] != 1.0f) x = x > 0.0f ? x / rep[e] : x * rep[e];
    x += add[e];
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
