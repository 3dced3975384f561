#include <string>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status embedding(const EmbeddingParams& p) {
  const int64_t tokens = p.ids.dim(0), hidden = p.table.dim(1), vocab = p.table.dim(0);
  const int32_t* ids = p.ids.ptr<int32_t>();
  auto inside = [&](int64_t t) { return ids[t] >= p.first_id && ids[t] - p.first_id < vocab; };
  for (int64_t t = 0; t < tokens; ++t) {
    if (!p.zero_outside && !inside(t))
      return Status::error("token id " + std::to_string(ids[t]) + " is outside the vocabulary [" + std::to_string(p.first_id) + ", " +
                           std::to_string(p.first_id + vocab) + ")");
  }
  if (p.table.dtype == DType::kI32) {  // an id map: exact copies
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < hidden; ++h)
        p.out.ptr<int32_t>()[t * hidden + h] = inside(t) ? p.table.ptr<int32_t>()[(ids[t] - p.first_id) * hidden + h] : 0;
    return Status::ok();
  }
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t row = ids[t] - p.first_id;
    for (int64_t h = 0; h < hidden; ++h)
      store_from_float(p.out.data, p.out.dtype, t * hidden + h, inside(t) ? load_as_float(p.table.data, p.table.dtype, row * hidden + h) : 0.0f);
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
