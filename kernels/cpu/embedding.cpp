#include <cstring>
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

Status scatter_rows(const ScatterRowsParams& p) {
  const int64_t n = p.src.dim(0), bytes = p.src.dim(1) * static_cast<int64_t>(dtype_size(p.src.dtype));
  const int32_t* rows = p.rows.ptr<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0 || rows[i] >= p.out.dim(0))
      return Status::error("scatter_rows: row " + std::to_string(rows[i]) + " is outside [0, " + std::to_string(p.out.dim(0)) + ")");
    std::memcpy(static_cast<char*>(p.out.data) + rows[i] * bytes, static_cast<const char*>(p.src.data) + i * bytes, static_cast<size_t>(bytes));
  }
  return Status::ok();
}

Status resolve_future_ids(const ResolveFutureIdsParams& p) {
  int32_t* ids = p.ids.ptr<int32_t>();
  const int32_t* table = p.table.ptr<int32_t>();
  for (int64_t t = 0; t < p.ids.dim(0); ++t) {
    if (ids[t] >= 0) continue;
    const int64_t slot = -static_cast<int64_t>(ids[t]) - 1;
    if (slot >= p.table.dim(0))
      return Status::error("future token slot " + std::to_string(slot) + " is outside the table of " + std::to_string(p.table.dim(0)));
    ids[t] = table[slot];
  }
  return Status::ok();
}

Status record_future_tokens(const RecordFutureTokensParams& p) {
  const int32_t* tokens = p.tokens.ptr<int32_t>();
  const int32_t* slots = p.slots.ptr<int32_t>();
  int32_t* table = p.table.ptr<int32_t>();
  for (int64_t i = 0; i < p.tokens.dim(0); ++i) {
    if (slots[i] < 0) continue;
    if (slots[i] >= p.table.dim(0))
      return Status::error("future token slot " + std::to_string(slots[i]) + " is outside the table of " + std::to_string(p.table.dim(0)));
    table[slots[i]] = tokens[i];
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
