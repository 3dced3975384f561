#include <string>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status embedding(const EmbeddingParams& p) {
  const int64_t tokens = p.ids.dim(0), hidden = p.table.dim(1), vocab = p.table.dim(0);
  const int32_t* ids = p.ids.ptr<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab)
      return Status::error("token id " + std::to_string(ids[t]) + " is outside the vocabulary [0, " +
                           std::to_string(vocab) + ")");
  }
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < hidden; ++h)
      store_from_float(p.out.data, p.out.dtype, t * hidden + h, load_as_float(p.table.data, p.table.dtype, ids[t] * hidden + h));
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
