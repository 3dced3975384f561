#include "model/weight_layout.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/error.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"

namespace aerie::model {

// Copies host tensors, converted to `dtype`, into consecutive rows of one new buffer.
Buffer concat_rows(const std::vector<TensorView>& parts, Device device, DType dtype, int64_t pad_to_rows) {
  int64_t rows = 0;
  const int64_t cols = parts.front().ndim == 2 ? parts.front().dim(1) : 1;
  for (const auto& p : parts) rows += p.dim(0);
  AERIE_CHECK(pad_to_rows == 0 || pad_to_rows >= rows, "cannot pad " << rows << " rows to " << pad_to_rows);
  rows = std::max(rows, pad_to_rows);
  std::vector<int64_t> shape = parts.front().ndim == 2 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows};
  std::vector<unsigned char> host(static_cast<size_t>(rows * cols) * dtype_size(dtype));
  int64_t at = 0;
  for (const auto& p : parts) {
    const int64_t n = p.numel();
    if (p.dtype == dtype) {
      std::memcpy(host.data() + at * static_cast<int64_t>(dtype_size(dtype)), p.data, static_cast<size_t>(p.nbytes()));
    } else {
      for (int64_t i = 0; i < n; ++i) store_from_float(host.data(), dtype, at + i, load_as_float(p.data, p.dtype, i));
    }
    at += n;
  }
  Buffer b(device, dtype, shape);
  b.copy_from_host(host.data(), static_cast<int64_t>(host.size()));
  return b;
}

Buffer copy_of(const TensorView& t, Device device, DType dtype) { return concat_rows({t}, device, dtype); }

TensorView row_range(const TensorView& t, int64_t begin, int64_t count) {
  AERIE_CHECK(begin >= 0 && count >= 0 && begin + count <= t.dim(0), "rows [" << begin << ", " << begin + count << ") of " << t.describe());
  return t.slice_rows(begin, begin + count);
}

TensorView column_range(const TensorView& t, int64_t begin, int64_t count, std::vector<unsigned char>& storage) {
  AERIE_CHECK(t.ndim == 2 && begin >= 0 && count > 0 && begin + count <= t.dim(1), "columns [" << begin << ", " << begin + count << ") of "
                                                                                              << t.describe());
  if (begin == 0 && count == t.dim(1)) return t;
  const size_t es = dtype_size(t.dtype), row = static_cast<size_t>(count) * es;
  storage.resize(static_cast<size_t>(t.dim(0)) * row);
  for (int64_t r = 0; r < t.dim(0); ++r)
    std::memcpy(storage.data() + static_cast<size_t>(r) * row,
                static_cast<const unsigned char*>(t.data) + (static_cast<size_t>(r * t.dim(1) + begin)) * es, row);
  return TensorView(storage.data(), t.dtype, {t.dim(0), count});
}

Buffer cut_block(Buffer full, const std::vector<RowRange>& rows, int64_t col_begin, int64_t col_count, int64_t pad_to_rows) {
  const TensorView& f = full.view();
  const int64_t cols = f.ndim == 2 ? f.dim(1) : 1;
  if (col_count == 0) col_count = cols - col_begin;
  int64_t n = 0;
  for (const auto& r : rows) {
    AERIE_CHECK(r.begin >= 0 && r.count >= 0 && r.begin + r.count <= f.dim(0), "rows [" << r.begin << ", " << r.begin + r.count << ") of "
                                                                                        << f.describe());
    n += r.count;
  }
  AERIE_CHECK(col_begin >= 0 && col_count > 0 && col_begin + col_count <= cols, "columns [" << col_begin << ", " << col_begin + col_count
                                                                                            << ") of " << f.describe());
  const int64_t out_rows = std::max(n, pad_to_rows);
  if (rows.size() == 1 && rows[0].begin == 0 && n == f.dim(0) && col_count == cols && out_rows == n) return full;
  Buffer out(f.device, f.dtype, f.ndim == 2 ? std::vector<int64_t>{out_rows, col_count} : std::vector<int64_t>{out_rows});
  if (out_rows > n) out.zero();
  OwnedStream stream(f.device);
  const size_t es = dtype_size(f.dtype);
  int64_t at = 0;
  for (const auto& r : rows) {
    copy_rows_async(static_cast<char*>(out.data()) + static_cast<size_t>(at * col_count) * es, static_cast<size_t>(col_count) * es,
                    static_cast<const char*>(full.data()) + static_cast<size_t>(r.begin * cols + col_begin) * es, static_cast<size_t>(cols) * es,
                    static_cast<size_t>(col_count) * es, static_cast<size_t>(r.count), stream.get());
    at += r.count;
  }
  synchronize(stream.get());
  return out;
}

Buffer vocab_shard_of(const TensorView& table, const TpShard& s, Device device, DType dtype) {
  const int64_t vocab = table.dim(0);
  return concat_rows({row_range(table, std::min(s.first_vocab(vocab), vocab), s.real_vocab_rows(vocab))}, device, dtype, s.vocab_rows(vocab));
}

Buffer vocab_shard_of(Buffer full, const TpShard& s) {
  const int64_t vocab = full.view().dim(0);
  return cut_block(std::move(full), {{std::min(s.first_vocab(vocab), vocab), s.real_vocab_rows(vocab)}}, 0, 0, s.vocab_rows(vocab));
}

std::vector<RowRange> qkv_rows_of(const LlamaConfig& c, const TpShard& s) {
  const int64_t d = c.head_dim, q = c.q_size(), kv = c.kv_size();
  const RowRange k{q + s.first_kv_head(c) * d, s.kv_heads(c) * d};
  return {{s.first_head(c) * d, s.heads(c) * d}, k, {k.begin + kv, k.count}};
}

// The rows of a q or k projection reordered so that each head's rotation pairs are
// adjacent: new row 2i = dim i, new row 2i + 1 = dim i + head_dim/2 (rope_kv_write.hpp).
// Returns the bytes (same dtype) that `view` then describes.
TensorView pair_adjacent_rows(const TensorView& t, int64_t head_dim, std::vector<unsigned char>& storage) {
  const int64_t rows = t.dim(0), cols = t.ndim == 2 ? t.dim(1) : 1, half = head_dim / 2;
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(t.dtype);
  storage.resize(static_cast<size_t>(rows) * row_bytes);
  const auto* src = static_cast<const unsigned char*>(t.data);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t head = r / head_dim, d = r % head_dim;
    const int64_t to = head * head_dim + (d < half ? 2 * d : 2 * (d - half) + 1);
    std::memcpy(storage.data() + static_cast<size_t>(to) * row_bytes, src + static_cast<size_t>(r) * row_bytes, row_bytes);
  }
  TensorView v = t;
  v.data = storage.data();
  return v;
}

// Rows of a and b alternating (a0, b0, a1, b1, ...): the merged gate/up projection, laid out
// so that one GEMM block owns both rows of a pair (kernels/silu_mul.hpp).
Buffer interleave_rows(const TensorView& a, const TensorView& b, Device device, DType dtype) {
  const int64_t rows = a.dim(0), cols = a.ndim == 2 ? a.dim(1) : 1;
  const size_t es = dtype_size(dtype);
  std::vector<unsigned char> host(static_cast<size_t>(2 * rows * cols) * es);
  const bool as_bytes = a.dtype == dtype && b.dtype == dtype;  // rows copied whole (any dtype: GGUF block rows too)
  const size_t row = static_cast<size_t>(cols) * es;
  for (int64_t r = 0; r < rows; ++r) {
    if (as_bytes) {
      std::memcpy(host.data() + static_cast<size_t>(2 * r) * row, static_cast<const unsigned char*>(a.data) + static_cast<size_t>(r) * row, row);
      std::memcpy(host.data() + static_cast<size_t>(2 * r + 1) * row, static_cast<const unsigned char*>(b.data) + static_cast<size_t>(r) * row, row);
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) {
      store_from_float(host.data(), dtype, (2 * r) * cols + c, load_as_float(a.data, a.dtype, r * cols + c));
      store_from_float(host.data(), dtype, (2 * r + 1) * cols + c, load_as_float(b.data, b.dtype, r * cols + c));
    }
  }
  Buffer out(device, dtype, a.ndim == 2 ? std::vector<int64_t>{2 * rows, cols} : std::vector<int64_t>{2 * rows});
  out.copy_from_host(host.data(), static_cast<int64_t>(host.size()));
  return out;
}

void check_float_tensor(const CheckpointReader& ckpt, const std::string& name, const TensorView& t) {
  AERIE_CHECK(is_floating(t.dtype), ckpt.file_of(name) << ": tensor '" << name << "' has dtype " << dtype_name(t.dtype)
                                                       << ", expected F32, BF16 or F16");
}

// N(0, std) (or a constant) drawn on the buffer's own device by Philox: the same seed gives
// the same weights on CPU and GPU, and an 8B-shaped model fills in well under a second.
Buffer random_buffer(uint64_t seed, std::vector<int64_t> shape, float std, Device device, DType dtype, float constant) {
  Buffer b(device, dtype, shape);
  OwnedStream stream(device);
  AERIE_CHECK_STATUS(kernels::fill_normal({.x = b.view(), .seed = seed, .mean = std > 0 ? 0.0f : constant, .std = std}, stream.get()));
  synchronize(stream.get());
  return b;
}


LayerProjections load_layer_projections(const TensorGetter& get, const std::string& p, const LlamaConfig& c, int64_t in, Device device,
                                        DType dtype, const TpShard& s) {
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size, d = c.head_dim;
  const int64_t i0 = s.first_intermediate(c), il = s.intermediate(c);
  LayerProjections w;
  std::vector<unsigned char> qs, ks, os, ds;
  // Whole heads are cut before the rotation pairs are made adjacent (within a head).
  w.qkv = concat_rows({pair_adjacent_rows(row_range(get(p + "self_attn.q_proj.weight", {q, in}), s.first_head(c) * d, s.heads(c) * d), d, qs),
                       pair_adjacent_rows(row_range(get(p + "self_attn.k_proj.weight", {kv, in}), s.first_kv_head(c) * d, s.kv_heads(c) * d), d, ks),
                       row_range(get(p + "self_attn.v_proj.weight", {kv, in}), s.first_kv_head(c) * d, s.kv_heads(c) * d)},
                      device, dtype);
  w.o_proj = copy_of(column_range(get(p + "self_attn.o_proj.weight", {h, q}), s.first_head(c) * d, s.heads(c) * d, os), device, dtype);
  w.post_norm = copy_of(get(p + "post_attention_layernorm.weight", {h}), device, dtype);
  w.gate_up = interleave_rows(row_range(get(p + "mlp.gate_proj.weight", {inter, h}), i0, il), row_range(get(p + "mlp.up_proj.weight", {inter, h}), i0, il),
                              device, dtype);
  w.down = copy_of(column_range(get(p + "mlp.down_proj.weight", {h, inter}), i0, il, ds), device, dtype);
  return w;
}

}  // namespace aerie::model
