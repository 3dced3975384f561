// Op entries: validate the Params (throwing aerie::Error that names the wrong field),
// then dispatch to the backend of the stream's device.
#include "kernels/backends.hpp"
#include "kernels/batch_invariant.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/error.hpp"

#include <algorithm>
#include <tuple>

namespace aerie::kernels {

namespace {

Device device_of(const TensorView& t) { return t.device; }

template <class Params, class CpuFn, class CudaFn>
Status dispatch(const Params& p, const Stream& s, Device data_device, CpuFn cpu_fn, CudaFn cuda_fn) {
  p.validate();
  AERIE_CHECK(data_device == s.device(), "tensors are on " << device_name(data_device)
                                                            << " but the stream is " << device_name(s.device()));
  if (s.device() == Device::kCpu) return cpu_fn(p);
  return cuda_fn(p, s.handle());
}

// A per-row (per-request) parameter: [rows] of dtype dt on device d; `of` names what has the rows.
void check_per_row(const TensorView& t, const char* name, DType dt, int64_t rows, Device d, const char* of) {
  check_tensor(t, name, 1, d);
  check_dtype(t, name, dt);
  AERIE_CHECK(t.dim(0) == rows, name << " has " << t.dim(0) << " rows, " << of << " has " << rows);
}

void check_rows_match(const TensorView& a, const char* fa, const TensorView& b, const char* fb) {
  AERIE_CHECK(a.dim(0) == b.dim(0), fa << " " << a.describe() << " and " << fb << " " << b.describe()
                                          << " disagree on rows");
}

}  // namespace

void EmbeddingParams::validate() const {
  check_tensor(ids, "ids", 1, ids.device);
  check_dtype(ids, "ids", DType::kI32);
  check_tensor(table, "table", 2, ids.device);
  check_tensor(out, "out", 2, ids.device);
  if (table.dtype == DType::kI32) {  // an id map (kernels/embedding.hpp)
    check_dtype(out, "out", DType::kI32);
  } else {
    check_floating(table, "table");
    check_floating(out, "out");
  }
  check_rows_match(ids, "ids", out, "out");
  AERIE_CHECK(out.dim(1) == table.dim(1), "out " << out.describe() << " and table " << table.describe()
                                                 << " disagree on hidden size");
}
void LogitAdjustParams::validate() const {
  check_tensor(logits, "logits", 2, logits.device);
  check_dtype(logits, "logits", DType::kF32);
  for (auto [t, name, dt] : {std::tuple{rows, "rows", DType::kI32}, std::tuple{ids, "ids", DType::kI32}, std::tuple{bias, "bias", DType::kF32},
                             std::tuple{rep, "rep", DType::kF32},
                             std::tuple{add, "add", DType::kF32}}) {
    check_tensor(t, name, 1, logits.device);
    check_dtype(t, name, dt);
    AERIE_CHECK(t.dim(0) == ids.dim(0), name << " " << t.describe() << " and ids " << ids.describe() << " disagree on entries");
  }
}
Status logit_adjust(const LogitAdjustParams& p, const Stream& s) {
  return dispatch(p, s, device_of(p.logits), cpu::logit_adjust,
                  [](const LogitAdjustParams& q, void* h) { return cuda::logit_adjust(q, h); });
}

void ScatterRowsParams::validate() const {
  check_tensor(src, "src", 2, src.device);
  check_tensor(rows, "rows", 1, src.device);
  check_dtype(rows, "rows", DType::kI32);
  check_tensor(out, "out", 2, src.device);
  check_rows_match(rows, "rows", src, "src");
  AERIE_CHECK(src.dtype == out.dtype && src.dim(1) == out.dim(1), "src " << src.describe() << " and out " << out.describe() << " disagree");
}
Status scatter_rows(const ScatterRowsParams& p, const Stream& s) {
  return dispatch(p, s, device_of(p.src), cpu::scatter_rows,
                  [](const ScatterRowsParams& q, void* h) { return cuda::scatter_rows(q, h); });
}

void ResolveFutureIdsParams::validate() const {
  check_tensor(ids, "ids", 1, ids.device);
  check_dtype(ids, "ids", DType::kI32);
  check_tensor(table, "table", 1, ids.device);
  check_dtype(table, "table", DType::kI32);
}
Status resolve_future_ids(const ResolveFutureIdsParams& p, const Stream& s) {
  return dispatch(p, s, device_of(p.ids), cpu::resolve_future_ids,
                  [](const ResolveFutureIdsParams& q, void* h) { return cuda::resolve_future_ids(q, h); });
}

void RecordFutureTokensParams::validate() const {
  check_tensor(tokens, "tokens", 1, tokens.device);
  check_dtype(tokens, "tokens", DType::kI32);
  check_per_row(slots, "slots", DType::kI32, tokens.dim(0), tokens.device, "tokens");
  check_tensor(table, "table", 1, tokens.device);
  check_dtype(table, "table", DType::kI32);
}
Status record_future_tokens(const RecordFutureTokensParams& p, const Stream& s) {
  return dispatch(p, s, device_of(p.tokens), cpu::record_future_tokens,
                  [](const RecordFutureTokensParams& q, void* h) { return cuda::record_future_tokens(q, h); });
}

Status embedding(const EmbeddingParams& p, const Stream& s) {
  return dispatch(p, s, device_of(p.ids), cpu::embedding,
                  [](const EmbeddingParams& q, void* h) { return cuda::embedding(q, h); });
}

void RmsNormParams::validate() const {
  check_tensor(x, "x", 2, x.device);
  check_floating(x, "x");
  check_tensor(weight, "weight", 1, x.device);
  check_floating(weight, "weight");
  check_tensor(y, "y", 2, x.device);
  check_floating(y, "y");
  AERIE_CHECK(weight.dim(0) == x.dim(1), "weight " << weight.describe() << " does not match x " << x.describe());
  AERIE_CHECK(y.dim(0) == x.dim(0) && y.dim(1) == x.dim(1), "y " << y.describe() << " does not match x " << x.describe());
  if (residual.defined()) {
    check_tensor(residual, "residual", 2, x.device);
    check_floating(residual, "residual");
    AERIE_CHECK(residual.dim(0) == x.dim(0) && residual.dim(1) == x.dim(1),
                "residual " << residual.describe() << " does not match x " << x.describe());
  }
  AERIE_CHECK(eps > 0.0f, "eps must be positive");
}
Status rms_norm(const RmsNormParams& p, const Stream& s) {
  return dispatch(p, s, p.x.device, cpu::rms_norm,
                  [](const RmsNormParams& q, void* h) { return cuda::rms_norm(q, h); });
}

void RmsNormPairParams::validate() const {
  const Device d = a.device;
  for (auto [t, name] : {std::pair{a, "a"}, std::pair{b, "b"}, std::pair{y, "y"}}) {
    check_tensor(t, name, 2, d);
    check_floating(t, name);
  }
  if (a_ids.defined()) {
    check_tensor(a_ids, "a_ids", 1, d);
    AERIE_CHECK(a_ids.dtype == DType::kI32 && a_ids.dim(0) == b.dim(0), "a_ids " << a_ids.describe() << " must be [" << b.dim(0) << "] i32");
    AERIE_CHECK(b.dim(1) == a.dim(1) && b.dtype == a.dtype, "b " << b.describe() << " does not match the table a " << a.describe());
  } else {
    AERIE_CHECK(b.dim(0) == a.dim(0) && b.dim(1) == a.dim(1) && b.dtype == a.dtype, "b " << b.describe() << " does not match a " << a.describe());
  }
  AERIE_CHECK(y.dim(0) == b.dim(0) && y.dim(1) == 2 * a.dim(1) && y.dtype == a.dtype,
              "y " << y.describe() << " must be [" << b.dim(0) << ", " << 2 * a.dim(1) << "] of a's dtype");
  for (auto [t, name] : {std::pair{weight_a, "weight_a"}, std::pair{weight_b, "weight_b"}}) {
    check_tensor(t, name, 1, d);
    check_floating(t, name);
    AERIE_CHECK(t.dim(0) == a.dim(1), name << " " << t.describe() << " does not match a " << a.describe());
  }
  if (b_copy.defined()) {
    check_tensor(b_copy, "b_copy", 2, d);
    AERIE_CHECK(b_copy.dim(0) == b.dim(0) && b_copy.dim(1) == b.dim(1) && b_copy.dtype == b.dtype,
                "b_copy " << b_copy.describe() << " does not match b " << b.describe());
  }
  AERIE_CHECK(eps > 0.0f, "eps must be positive");
}
Status rms_norm_pair(const RmsNormPairParams& p, const Stream& s) {
  return dispatch(p, s, p.a.device, cpu::rms_norm_pair,
                  [](const RmsNormPairParams& q, void* h) { return cuda::rms_norm_pair(q, h); });
}

void RopeParams::validate() const {
  check_tensor(q, "q", 3, q.device);
  check_floating(q, "q");
  check_tensor(k, "k", 3, q.device);
  check_floating(k, "k");
  check_tensor(positions, "positions", 1, q.device);
  check_dtype(positions, "positions", DType::kI32);
  check_tensor(inv_freq, "inv_freq", 1, q.device);
  check_dtype(inv_freq, "inv_freq", DType::kF32);
  check_rows_match(q, "q", k, "k");
  check_rows_match(q, "q", positions, "positions");
  AERIE_CHECK(q.dim(2) == k.dim(2) && q.dim(2) % 2 == 0, "q and k need the same even head_dim, got "
                                                          << q.describe() << " and " << k.describe());
  AERIE_CHECK(inv_freq.dim(0) == q.dim(2) / 2, "inv_freq " << inv_freq.describe() << " must have head_dim/2 entries");
}
Status rope(const RopeParams& p, const Stream& s) {
  return dispatch(p, s, p.q.device, cpu::rope, [](const RopeParams& q, void* h) { return cuda::rope(q, h); });
}

void MatmulParams::validate() const {
  check_tensor(x, "x", 2, x.device);
  check_floating(x, "x");
  check_tensor(w, "w", 2, x.device);
  check_floating(w, "w");
  AERIE_CHECK(w_fp8.defined() == w_scale.defined(), "w_fp8 and w_scale come together (got "
                                                       << (w_fp8.defined() ? "w_fp8" : "w_scale") << " alone)");
  if (w_fp8.defined()) {
    check_tensor(w_fp8, "w_fp8", 2, x.device);
    check_dtype(w_fp8, "w_fp8", DType::kF8E4M3);
    AERIE_CHECK(w_fp8.dim(0) == w.dim(0) && w_fp8.dim(1) == w.dim(1), "w_fp8 " << w_fp8.describe() << " must have w's shape " << w.describe());
    check_per_row(w_scale, "w_scale", DType::kF32, w.dim(0), x.device, "w");
  }
  if (w_blocks.defined()) {
    AERIE_CHECK(!w_fp8.defined(), "w_blocks and w_fp8 are two copies of w for the same products: give one");
    AERIE_CHECK(x.device == Device::kCpu, "w_blocks (GGUF blocks of w) are read by the CPU backend only, x is " << x.describe());
    w_blocks.validate(w.dim(0), w.dim(1), "w_blocks");
  }
  check_tensor(y, "y", 2, x.device);
  check_floating(y, "y");
  AERIE_CHECK(x.dim(1) == w.dim(1), "x " << x.describe() << " and w " << w.describe() << " disagree on k");
  AERIE_CHECK(y.dim(0) == x.dim(0) && y.dim(1) == w.dim(0),
              "y " << y.describe() << " must be [" << x.dim(0) << ", " << w.dim(0) << "]");
  if (bias.defined()) {
    check_tensor(bias, "bias", 1, x.device);
    check_floating(bias, "bias");
    AERIE_CHECK(bias.dim(0) == w.dim(0), "bias " << bias.describe() << " must have n=" << w.dim(0) << " entries");
  }
}
void set_gemv_max_rows(int rows) { cuda::set_gemv_max_rows(rows); }
int gemv_max_rows() { return cuda::gemv_max_rows(); }
void set_gemv_chunked_rows(int64_t rows) { cuda::set_gemv_chunked_rows(rows); }

Status matmul(const MatmulParams& p, const Stream& s) {
  return dispatch(p, s, p.x.device, cpu::matmul, [](const MatmulParams& q, void* h) { return cuda::matmul(q, h); });
}

void GateUpSiluParams::validate() const {
  MatmulParams{.x = x, .w = w, .bias = bias, .w_fp8 = w_fp8, .w_scale = w_scale, .w_blocks = w_blocks, .y = gate_up}.validate();
  SiluMulParams{.gate_up = gate_up, .out = out}.validate();
}
Status gate_up_silu(const GateUpSiluParams& p, const Stream& s) {
  return dispatch(p, s, p.x.device, cpu::gate_up_silu, [](const GateUpSiluParams& q, void* h) { return cuda::gate_up_silu(q, h); });
}

void SiluMulParams::validate() const {
  check_tensor(gate_up, "gate_up", 2, gate_up.device);
  check_floating(gate_up, "gate_up");
  check_tensor(out, "out", 2, gate_up.device);
  check_floating(out, "out");
  check_rows_match(gate_up, "gate_up", out, "out");
  AERIE_CHECK(gate_up.dim(1) == 2 * out.dim(1), "gate_up " << gate_up.describe() << " must be twice as wide as out "
                                                           << out.describe());
}
Status silu_mul(const SiluMulParams& p, const Stream& s) {
  return dispatch(p, s, p.gate_up.device, cpu::silu_mul,
                  [](const SiluMulParams& q, void* h) { return cuda::silu_mul(q, h); });
}

void AttentionParams::validate() const {
  Device d = q.device;
  check_tensor(q, "q", 3, d);
  check_floating(q, "q");
  check_tensor(k_cache, "k_cache", 3, d);
  check_floating(k_cache, "k_cache");
  check_tensor(v_cache, "v_cache", 3, d);
  check_dtype(v_cache, "v_cache", k_cache.dtype);
  check_tensor(out, "out", 3, d);
  check_floating(out, "out");
  AERIE_CHECK(out.dim(0) == q.dim(0) && out.dim(1) == q.dim(1) && out.dim(2) == q.dim(2),
              "out " << out.describe() << " must match q " << q.describe());
  AERIE_CHECK(k_cache.dim(0) == v_cache.dim(0) && k_cache.dim(1) == v_cache.dim(1) && k_cache.dim(2) == v_cache.dim(2),
              "k_cache " << k_cache.describe() << " and v_cache " << v_cache.describe() << " differ");
  AERIE_CHECK(k_cache.dim(2) == q.dim(2), "head_dim of q " << q.describe() << " and cache " << k_cache.describe() << " differ");
  AERIE_CHECK(k_cache.dim(1) > 0 && q.dim(1) % k_cache.dim(1) == 0,
              "q heads " << q.dim(1) << " must be a multiple of kv heads " << k_cache.dim(1));
  check_tensor(qo_indptr, "qo_indptr", 1, d);
  check_dtype(qo_indptr, "qo_indptr", DType::kI32);
  check_tensor(kv_indptr, "kv_indptr", 1, d);
  check_dtype(kv_indptr, "kv_indptr", DType::kI32);
  AERIE_CHECK(qo_indptr.dim(0) == kv_indptr.dim(0) && qo_indptr.dim(0) >= 1,
              "qo_indptr and kv_indptr must both have batch + 1 entries");
  check_tensor(kv_indices, "kv_indices", 1, d);
  check_dtype(kv_indices, "kv_indices", DType::kI32);
  AERIE_CHECK(tokens_per_block >= 1 && q.dim(0) % tokens_per_block == 0,
              "attention: " << tokens_per_block << " tokens per block do not divide " << q.dim(0) << " query tokens");
  if (custom_mask.defined()) {
    check_tensor(custom_mask, "custom_mask", 1, d);
    check_dtype(custom_mask, "custom_mask", DType::kU8);
    check_tensor(mask_indptr, "mask_indptr", 1, d);
    check_dtype(mask_indptr, "mask_indptr", DType::kI32);
    AERIE_CHECK(mask_indptr.dim(0) == qo_indptr.dim(0), "mask_indptr must have batch + 1 entries");
  }
  AERIE_CHECK(num_splits >= 1 && num_splits <= kMaxAttentionSplits, "num_splits " << num_splits << " outside [1, " << kMaxAttentionSplits << "]");
  AERIE_CHECK(q.dim(2) <= 256, "head_dim " << q.dim(2) << " above 256 is not supported");
  if (d == Device::kCuda)
    AERIE_CHECK(q.dim(2) * static_cast<int64_t>(dtype_size(k_cache.dtype)) % 16 == 0 &&
                    q.dim(2) * static_cast<int64_t>(dtype_size(q.dtype)) % 16 == 0,
                "head_dim " << q.dim(2) << " must span whole 16-byte chunks of the q and cache dtypes on CUDA");
  if (num_splits > 1 && d == Device::kCuda) {
    check_tensor(workspace, "workspace", 1, d);
    check_dtype(workspace, "workspace", DType::kF32);
    AERIE_CHECK(workspace.dim(0) >= attention_workspace_floats(q.dim(0), q.dim(1), q.dim(2), num_splits),
                "workspace " << workspace.describe() << " is too small for " << num_splits << " splits");
  }
}

int64_t attention_workspace_floats(int64_t tokens, int64_t q_heads, int64_t head_dim, int num_splits) {
  return tokens * q_heads * num_splits * (head_dim + 2);
}

bool attention_tokens_per_block_fits(int tokens_per_block, int64_t group, std::span<const int64_t> q_lens) {
  if (tokens_per_block < 1) return false;
  if (tokens_per_block > 1 && (group > kAttentionMaxGroup || group * tokens_per_block > kAttentionMaxRows)) return false;
  return std::all_of(q_lens.begin(), q_lens.end(), [&](int64_t q) { return q % tokens_per_block == 0; });
}

int attention_tokens_per_block_for(std::span<const int64_t> q_lens, int64_t group, int64_t kv_heads, int num_sms, int forced) {
  if (batch_invariant()) return 1;  // a block's keys are its one query's (kernels/batch_invariant.hpp)
  int64_t tokens = 0, longest = 0;
  for (int64_t q : q_lens) tokens += q, longest = std::max(longest, q);
  if (longest > 64) return 1;
  if (forced > 0) return attention_tokens_per_block_fits(forced, group, q_lens) ? forced : 1;
  if (tokens <= 4 || tokens * kv_heads <= kAttentionOneTokenBlocks) return 1;
  if (attention_tokens_per_block_fits(4, group, q_lens) && (tokens / 4) * kv_heads >= 2 * static_cast<int64_t>(num_sms)) return 4;
  return attention_tokens_per_block_fits(2, group, q_lens) ? 2 : 1;
}

int attention_forced_blocks_per_sm() {
  static const int blocks = std::max(0, env_knob("AERIE_ATTN_BLOCKS_PER_SM"));
  return blocks;
}

bool attention_prefill_on_tensor_cores(const AttentionParams& p) {
  static const int knob = env_knob("AERIE_ATTN_PREFILL_TC");
  // Batch-invariant attention takes the decode kernel for every batch (kernels/batch_invariant.hpp).
  if (knob < 0 || p.q.device != Device::kCuda || batch_invariant()) return false;
  const DType t = p.q.dtype;
  const int64_t batch = p.qo_indptr.dim(0) - 1, dim = p.q.dim(2);
  return (t == DType::kBF16 || t == DType::kF16) && p.k_cache.dtype == t && p.v_cache.dtype == t && p.out.dtype == t && dim % 16 == 0 &&
         dim <= kAttentionPrefillMaxDim && !p.custom_mask.defined() && p.num_splits == 1 && batch >= 1 &&
         p.q.dim(0) >= kAttentionPrefillMinTokensPerSequence * batch;
}

bool attention_decode_on_tensor_cores(const AttentionParams& p, int num_sms) {
  static const int knob = env_knob("AERIE_ATTN_DECODE_TC");
  if (knob < 0 || p.q.device != Device::kCuda) return false;
  const DType t = p.q.dtype;
  const int64_t dim = p.q.dim(2), kv_heads = p.k_cache.dim(1), group = p.q.dim(1) / kv_heads;
  const int tpb = p.tokens_per_block;
  const bool fits = (t == DType::kBF16 || t == DType::kF16) && p.k_cache.dtype == t && p.v_cache.dtype == t && p.out.dtype == t &&
                    (dim == 64 || dim == 128) && group <= kAttentionMaxGroup && tpb >= 1 && group * tpb <= kAttentionDecodeTcMaxRows;
  if (!fits) return false;
  if (batch_invariant()) return true;  // whenever the model fits it, whatever the batch
  static const int64_t small = env_knob_or("AERIE_ATTN_DECODE_TC_SMALL_BLOCKS", kAttentionDecodeTcSmallBlocks);
  const int64_t blocks = (p.q.dim(0) / tpb) * kv_heads;
  const int64_t sequences = p.qo_indptr.defined() ? p.qo_indptr.dim(0) - 1 : p.q.dim(0);
  const bool few_one_token_blocks = tpb == 1 && p.q.dim(0) > sequences && blocks <= kAttentionOneTokenBlocksOnTensorCores;
  return knob > 0 || p.tensor_cores_if_fit || blocks >= num_sms || blocks <= small || few_one_token_blocks;
}

int attention_forced_tokens_per_block() {
  static const int forced = env_knob("AERIE_ATTN_TOKENS_PER_BLOCK");
  return forced;
}

int attention_min_split_keys() {
  static const int forced = env_knob("AERIE_ATTN_MIN_SPLIT_KEYS");
  return forced > 0 ? forced : kAttentionMinSplitKeys;
}

int attention_splits_for(int64_t query_blocks, int64_t kv_heads, int64_t max_kv_len, int num_sms, int blocks_per_sm) {
  if (batch_invariant()) return batch_invariant_attention_splits(max_kv_len);
  const int64_t blocks = std::max<int64_t>(1, query_blocks * kv_heads);
  if (blocks_per_sm <= 0) blocks_per_sm = blocks >= num_sms ? kAttentionBlocksPerSmFull : kAttentionBlocksPerSm;
  int64_t splits = (static_cast<int64_t>(blocks_per_sm) * num_sms + blocks - 1) / blocks;
  splits = std::min<int64_t>(splits, (max_kv_len + kAttentionMinSplitKeys - 1) / kAttentionMinSplitKeys);
  return static_cast<int>(std::clamp<int64_t>(splits, 1, kMaxAttentionSplits));
}
Status attention(const AttentionParams& p, const Stream& s) {
  return dispatch(p, s, p.q.device, cpu::attention,
                  [](const AttentionParams& q, void* h) { return cuda::attention(q, h); });
}

void KvWriteParams::validate() const {
  Device d = k.device;
  check_tensor(k, "k", 3, d);
  check_floating(k, "k");
  check_tensor(v, "v", 3, d);
  check_floating(v, "v");
  check_tensor(slots, "slots", 1, d);
  check_dtype(slots, "slots", DType::kI32);
  check_tensor(k_cache, "k_cache", 3, d);
  check_floating(k_cache, "k_cache");
  check_tensor(v_cache, "v_cache", 3, d);
  check_dtype(v_cache, "v_cache", k_cache.dtype);
  check_rows_match(k, "k", slots, "slots");
  check_rows_match(k, "k", v, "v");
  AERIE_CHECK(k.dim(1) == k_cache.dim(1) && k.dim(2) == k_cache.dim(2) && v.dim(1) == v_cache.dim(1) &&
                  v.dim(2) == v_cache.dim(2),
              "k/v rows " << k.describe() << " do not match the cache " << k_cache.describe());
}
Status kv_write(const KvWriteParams& p, const Stream& s) {
  return dispatch(p, s, p.k.device, cpu::kv_write, [](const KvWriteParams& q, void* h) { return cuda::kv_write(q, h); });
}

void KvMoveParams::validate() const {
  AERIE_CHECK(!k_caches.empty() && k_caches.size() == v_caches.size(),
              "kv_move needs a K and a V cache for every layer, got " << k_caches.size() << " and " << v_caches.size());
  const TensorView& first = k_caches.front();
  Device d = first.device;
  check_tensor(src_slots, "src_slots", 1, d);
  check_dtype(src_slots, "src_slots", DType::kI32);
  check_tensor(dst_slots, "dst_slots", 1, d);
  check_dtype(dst_slots, "dst_slots", DType::kI32);
  check_rows_match(src_slots, "src_slots", dst_slots, "dst_slots");
  check_tensor(first, "k_cache", 3, d);
  check_floating(first, "k_cache");
  for (size_t l = 0; l < k_caches.size(); ++l)
    for (const TensorView* c : {&k_caches[l], &v_caches[l]}) {
      check_tensor(*c, "kv cache", 3, d);
      check_dtype(*c, "kv cache", first.dtype);
      AERIE_CHECK(c->dim(0) == first.dim(0) && c->dim(1) * c->dim(2) == first.dim(1) * first.dim(2),
                  "layer " << l << "'s cache " << c->describe() << " differs from layer 0's K cache " << first.describe());
    }
}
Status kv_move(const KvMoveParams& p, const Stream& s) {
  AERIE_CHECK(!p.k_caches.empty(), "kv_move needs at least one layer's cache");
  return dispatch(p, s, p.k_caches.front().device, cpu::kv_move, [](const KvMoveParams& q, void* h) { return cuda::kv_move(q, h); });
}

void SampleParams::validate() const {
  Device d = logits.device;
  check_tensor(logits, "logits", 2, d);
  check_dtype(logits, "logits", DType::kF32);
  const int64_t b = logits.dim(0);
  auto per_row = [&](const TensorView& t, const char* name, DType dt) { check_per_row(t, name, dt, b, d, "logits"); };
  per_row(temperature, "temperature", DType::kF32);
  per_row(top_p, "top_p", DType::kF32);
  per_row(top_k, "top_k", DType::kI32);
  per_row(min_p, "min_p", DType::kF32);
  per_row(seed, "seed", DType::kI64);
  per_row(step, "step", DType::kI64);
  per_row(out, "out", DType::kI32);
  if (out_copy.defined()) per_row(out_copy, "out_copy", DType::kI32);
  if (id_map.defined()) {
    AERIE_CHECK(id_map.device == d, "sample: id_map " << id_map.describe() << " is not on the logits' device");
    check_dtype(id_map, "id_map", DType::kI32);
    AERIE_CHECK(id_map.numel() == logits.dim(1), "sample: id_map " << id_map.describe() << " must map every one of the " << logits.dim(1)
                                                                   << " logits' ids");
  }
  if (workspace.defined()) {
    check_tensor(workspace, "workspace", 1, d);
    check_dtype(workspace, "workspace", DType::kF32);
    AERIE_CHECK(workspace.dim(0) >= sample_workspace_floats(b), "workspace " << workspace.describe() << " is too small");
  }
}

int64_t sample_workspace_floats(int64_t batch) { return batch * 2 * 32; }
Status sample(const SampleParams& p, const Stream& s) {
  return dispatch(p, s, p.logits.device, cpu::sample, [](const SampleParams& q, void* h) { return cuda::sample(q, h); });
}

void TreeAcceptParams::validate() const {
  const Device d = logits.device;
  check_tensor(logits, "logits", 2, d);
  check_dtype(logits, "logits", DType::kF32);
  check_tensor(tokens, "tokens", 2, d);
  check_dtype(tokens, "tokens", DType::kI32);
  check_tensor(parents, "parents", 2, d);
  check_dtype(parents, "parents", DType::kI32);
  check_tensor(path, "path", 2, d);
  check_dtype(path, "path", DType::kI32);
  const int64_t b = tokens.dim(0), n = tokens.dim(1);
  AERIE_CHECK(n >= 1, "tokens " << tokens.describe() << " must hold at least the root");
  AERIE_CHECK(parents.dim(0) == b && parents.dim(1) == n, "parents " << parents.describe() << " and tokens " << tokens.describe() << " differ");
  AERIE_CHECK(path.dim(0) == b && path.dim(1) == n, "path " << path.describe() << " and tokens " << tokens.describe() << " differ");
  AERIE_CHECK(logits.dim(0) == b * n, "logits " << logits.describe() << " must hold one row per node of " << b << " trees of " << n);
  auto per_request = [&](const TensorView& t, const char* name, DType dt) { check_per_row(t, name, dt, b, d, "tokens (trees)"); };
  per_request(temperature, "temperature", DType::kF32);
  per_request(top_p, "top_p", DType::kF32);
  per_request(top_k, "top_k", DType::kI32);
  per_request(min_p, "min_p", DType::kF32);
  per_request(seed, "seed", DType::kI64);
  per_request(step, "step", DType::kI64);
  per_request(bonus, "bonus", DType::kI32);
  check_tensor(workspace, "workspace", 1, d);
  check_dtype(workspace, "workspace", DType::kF32);
  AERIE_CHECK(workspace.dim(0) >= tree_accept_workspace_floats(b * n), "workspace " << workspace.describe() << " is too small");
}
Status tree_accept(const TreeAcceptParams& p, const Stream& s) {
  return dispatch(p, s, p.logits.device, cpu::tree_accept, [](const TreeAcceptParams& q, void* h) { return cuda::tree_accept(q, h); });
}

void GreedyChainAcceptParams::validate() const {
  const Device d = drafts.device;
  const int64_t n = tokens_per_request;
  check_tensor(drafts, "drafts", 1, d);
  check_dtype(drafts, "drafts", DType::kI32);
  AERIE_CHECK(n >= 1 && drafts.dim(0) % n == 0, "drafts " << drafts.describe() << " must hold " << n << " rows per request");
  const int64_t batch = drafts.dim(0) / n;
  check_tensor(argmax, "argmax", 1, d);
  check_dtype(argmax, "argmax", DType::kI32);
  AERIE_CHECK(argmax.dim(0) >= batch * n, "argmax " << argmax.describe() << " has fewer rows than drafts " << drafts.describe());
  check_tensor(last_rows, "last_rows", 1, d);
  check_dtype(last_rows, "last_rows", DType::kI32);
  AERIE_CHECK(last_rows.dim(0) >= batch, "last_rows " << last_rows.describe() << " has fewer rows than the " << batch << " requests");
  check_tensor(tokens, "tokens", 1, d);
  check_dtype(tokens, "tokens", DType::kI32);
  AERIE_CHECK(tokens.dim(0) == last_rows.dim(0) * n, "tokens " << tokens.describe() << " must hold " << n << " per row of last_rows " << last_rows.describe());
}
Status greedy_chain_accept(const GreedyChainAcceptParams& p, const Stream& s) {
  return dispatch(p, s, p.drafts.device, cpu::greedy_chain_accept,
                  [](const GreedyChainAcceptParams& q, void* h) { return cuda::greedy_chain_accept(q, h); });
}

namespace {

// A frontier of `rows` nodes and a candidate table of `batch` requests, on device d.
void check_frontier(const TreeFrontier& f, int64_t rows, Device d) {
  const std::pair<const TensorView*, const char*> ints[] = {{&f.tokens, "frontier.tokens"}, {&f.nodes, "frontier.nodes"}, {&f.sources, "frontier.sources"}};
  for (const auto& [t, name] : ints) check_per_row(*t, name, DType::kI32, rows, d, "the frontier");
  check_per_row(f.scores, "frontier.scores", DType::kF32, rows, d, "the frontier");
}
void check_candidates(const TreeCandidates& c, int64_t batch, int64_t needed, Device d) {
  const std::tuple<const TensorView*, const char*, DType> all[] = {
      {&c.tokens, "candidates.tokens", DType::kI32}, {&c.scores, "candidates.scores", DType::kF32}, {&c.parents, "candidates.parents", DType::kI32}};
  for (const auto& [t, name, dt] : all) {
    check_tensor(*t, name, 2, d);
    check_dtype(*t, name, dt);
    AERIE_CHECK(t->dim(0) == batch && t->dim(1) == c.tokens.dim(1), name << " " << t->describe() << " must be [" << batch << ", "
                                                                           << c.tokens.dim(1) << "]");
  }
  AERIE_CHECK(c.tokens.dim(1) >= needed, "the candidate tables hold " << c.tokens.dim(1) << " per request, this step writes up to " << needed);
}

}  // namespace

void TreeDraftBeginParams::validate() const {
  const Device d = rows.device;
  check_tensor(rows, "rows", 1, d);
  check_dtype(rows, "rows", DType::kI32);
  check_tensor(top_tokens, "top_tokens", 2, d);
  check_dtype(top_tokens, "top_tokens", DType::kI32);
  check_tensor(top_logp, "top_logp", 2, d);
  check_dtype(top_logp, "top_logp", DType::kF32);
  const int64_t k = top_tokens.dim(1), batch = rows.dim(0);
  AERIE_CHECK(k >= 1 && k <= kMaxTopK, "top_tokens " << top_tokens.describe() << ": k must be in [1, " << kMaxTopK << "]");
  AERIE_CHECK(top_logp.dim(0) == top_tokens.dim(0) && top_logp.dim(1) == k,
              "top_logp " << top_logp.describe() << " and top_tokens " << top_tokens.describe() << " differ");
  check_frontier(frontier, batch * k, d);
  check_candidates(candidates, batch, k, d);
}
Status tree_draft_begin(const TreeDraftBeginParams& p, const Stream& s) {
  return dispatch(p, s, p.rows.device, cpu::tree_draft_begin, [](const TreeDraftBeginParams& q, void* h) { return cuda::tree_draft_begin(q, h); });
}

void TreeDraftExpandParams::validate() const {
  const Device d = child_tokens.device;
  check_tensor(child_tokens, "child_tokens", 2, d);
  check_dtype(child_tokens, "child_tokens", DType::kI32);
  check_tensor(child_logp, "child_logp", 2, d);
  check_dtype(child_logp, "child_logp", DType::kF32);
  const int64_t k = child_tokens.dim(1), rows = child_tokens.dim(0);
  AERIE_CHECK(k >= 1 && k <= kMaxTopK && rows % k == 0,
              "child_tokens " << child_tokens.describe() << " must be [batch * k, k] with k in [1, " << kMaxTopK << "]");
  AERIE_CHECK(child_logp.dim(0) == rows && child_logp.dim(1) == k, "child_logp " << child_logp.describe() << " and child_tokens "
                                                                                  << child_tokens.describe() << " differ");
  AERIE_CHECK(step >= 1, "step must be >= 1, got " << step);
  check_frontier(frontier, rows, d);
  check_candidates(candidates, rows / k, tree_draft_candidates(step + 1, k), d);
  check_per_row(kv_indptr, "kv_indptr", DType::kI32, rows + 1, d, "the frontier (plus one)");
  check_tensor(kv_indices, "kv_indices", 1, d);
  check_dtype(kv_indices, "kv_indices", DType::kI32);
  AERIE_CHECK(next_kv_indptr.defined() == next_kv_indices.defined(), "next_kv_indptr and next_kv_indices come together");
  if (next_kv_indptr.defined()) {
    check_per_row(next_kv_indptr, "next_kv_indptr", DType::kI32, rows + 1, d, "the frontier (plus one)");
    check_tensor(next_kv_indices, "next_kv_indices", 1, d);
    check_dtype(next_kv_indices, "next_kv_indices", DType::kI32);
  }
}
Status tree_draft_expand(const TreeDraftExpandParams& p, const Stream& s) {
  return dispatch(p, s, p.child_tokens.device, cpu::tree_draft_expand,
                  [](const TreeDraftExpandParams& q, void* h) { return cuda::tree_draft_expand(q, h); });
}

void LogSoftmaxParams::validate() const {
  check_tensor(logits, "logits", 2, logits.device);
  check_dtype(logits, "logits", DType::kF32);
  check_tensor(out, "out", 2, logits.device);
  check_dtype(out, "out", DType::kF32);
  AERIE_CHECK(out.dim(0) == logits.dim(0) && out.dim(1) == logits.dim(1), "out must match logits");
}
Status log_softmax(const LogSoftmaxParams& p, const Stream& s) {
  return dispatch(p, s, p.logits.device, cpu::log_softmax,
                  [](const LogSoftmaxParams& q, void* h) { return cuda::log_softmax(q, h); });
}

void RopeKvWriteParams::validate() const {
  Device d = qkv.device;
  check_tensor(qkv, "qkv", 2, d);
  check_floating(qkv, "qkv");
  check_tensor(positions, "positions", 1, d);
  check_dtype(positions, "positions", DType::kI32);
  check_tensor(inv_freq, "inv_freq", 1, d);
  check_dtype(inv_freq, "inv_freq", DType::kF32);
  check_tensor(slots, "slots", 1, d);
  check_dtype(slots, "slots", DType::kI32);
  check_tensor(q_out, "q_out", 3, d);
  check_floating(q_out, "q_out");
  check_tensor(k_cache, "k_cache", 3, d);
  check_floating(k_cache, "k_cache");
  check_tensor(v_cache, "v_cache", 3, d);
  check_dtype(v_cache, "v_cache", k_cache.dtype);
  check_rows_match(qkv, "qkv", positions, "positions");
  check_rows_match(qkv, "qkv", slots, "slots");
  check_rows_match(qkv, "qkv", q_out, "q_out");
  const int64_t dim = q_out.dim(2);
  AERIE_CHECK(dim % 2 == 0 && k_cache.dim(2) == dim, "q_out " << q_out.describe() << " and k_cache " << k_cache.describe()
                                                             << " need the same even head_dim");
  AERIE_CHECK(qkv.dim(1) == (q_out.dim(1) + 2 * k_cache.dim(1)) * dim,
              "qkv " << qkv.describe() << " must hold q_heads + 2 * kv_heads heads of " << dim);
  AERIE_CHECK(inv_freq.dim(0) == dim / 2, "inv_freq " << inv_freq.describe() << " must have head_dim/2 entries");
}
Status rope_kv_write(const RopeKvWriteParams& p, const Stream& s) {
  return dispatch(p, s, p.qkv.device, cpu::rope_kv_write,
                  [](const RopeKvWriteParams& q, void* h) { return cuda::rope_kv_write(q, h); });
}

void QkvRopeParams::validate() const {
  MatmulParams{.x = x, .w = w, .bias = bias, .w_fp8 = w_fp8, .w_scale = w_scale, .w_blocks = w_blocks, .y = qkv}.validate();
  RopeKvWriteParams{.qkv = qkv, .positions = positions, .inv_freq = inv_freq, .slots = slots, .q_out = q_out, .k_cache = k_cache,
                    .v_cache = v_cache, .attention_scaling = attention_scaling}.validate();
}
Status qkv_rope(const QkvRopeParams& p, const Stream& s) {
  return dispatch(p, s, p.x.device, cpu::qkv_rope, [](const QkvRopeParams& q, void* h) { return cuda::qkv_rope(q, h); });
}

void TopKParams::validate() const {
  Device d = x.device;
  check_tensor(x, "x", 2, d);
  check_dtype(x, "x", DType::kF32);
  check_tensor(values, "values", 2, d);
  check_dtype(values, "values", DType::kF32);
  check_tensor(indices, "indices", 2, d);
  check_dtype(indices, "indices", DType::kI32);
  const int64_t k = values.dim(1);
  AERIE_CHECK(values.dim(0) == x.dim(0) && indices.dim(0) == x.dim(0) && indices.dim(1) == k,
              "values " << values.describe() << " and indices " << indices.describe() << " must be [rows, k]");
  AERIE_CHECK(k >= 1 && k <= x.dim(1) && k <= kMaxTopK, "k=" << k << " must be in [1, min(n=" << x.dim(1) << ", " << kMaxTopK << ")]");
}
Status topk(const TopKParams& p, const Stream& s) {
  return dispatch(p, s, p.x.device, cpu::topk, [](const TopKParams& q, void* h) { return cuda::topk(q, h); });
}

void FillNormalParams::validate() const {
  AERIE_CHECK(x.defined(), "x is not set");
  check_floating(x, "x");
  AERIE_CHECK(std >= 0.0f, "std must be >= 0");
}
Status fill_normal(const FillNormalParams& p, const Stream& s) {
  return dispatch(p, s, p.x.device, cpu::fill_normal, [](const FillNormalParams& q, void* h) { return cuda::fill_normal(q, h); });
}

}  // namespace aerie::kernels
