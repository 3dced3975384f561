// Op entries: validate the Params (throwing aerie::Error that names the wrong field),
// then dispatch to the backend of the stream's device.
#include "kernels/backends.hpp"
#include "kernels/error.hpp"

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

void check_rows_match(const TensorView& a, const char* fa, const TensorView& b, const char* fb) {
  AERIE_CHECK(a.dim(0) == b.dim(0), fa << " " << a.describe() << " and " << fb << " " << b.describe()
                                          << " disagree on rows");
}

}  // namespace

void EmbeddingParams::validate() const {
  check_tensor(ids, "ids", 1, ids.device);
  check_dtype(ids, "ids", DType::kI32);
  check_tensor(table, "table", 2, ids.device);
  check_floating(table, "table");
  check_tensor(out, "out", 2, ids.device);
  check_floating(out, "out");
  check_rows_match(ids, "ids", out, "out");
  AERIE_CHECK(out.dim(1) == table.dim(1), "out " << out.describe() << " and table " << table.describe()
                                                 << " disagree on hidden size");
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
Status matmul(const MatmulParams& p, const Stream& s) {
  return dispatch(p, s, p.x.device, cpu::matmul, [](const MatmulParams& q, void* h) { return cuda::matmul(q, h); });
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
  if (custom_mask.defined()) {
    check_tensor(custom_mask, "custom_mask", 1, d);
    check_dtype(custom_mask, "custom_mask", DType::kU8);
    check_tensor(mask_indptr, "mask_indptr", 1, d);
    check_dtype(mask_indptr, "mask_indptr", DType::kI32);
    AERIE_CHECK(mask_indptr.dim(0) == qo_indptr.dim(0), "mask_indptr must have batch + 1 entries");
  }
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

void SampleParams::validate() const {
  Device d = logits.device;
  check_tensor(logits, "logits", 2, d);
  check_dtype(logits, "logits", DType::kF32);
  const int64_t b = logits.dim(0);
  auto per_row = [&](const TensorView& t, const char* name, DType dt) {
    check_tensor(t, name, 1, d);
    check_dtype(t, name, dt);
    AERIE_CHECK(t.dim(0) == b, name << " has " << t.dim(0) << " rows, logits has " << b);
  };
  per_row(temperature, "temperature", DType::kF32);
  per_row(top_p, "top_p", DType::kF32);
  per_row(top_k, "top_k", DType::kI32);
  per_row(min_p, "min_p", DType::kF32);
  per_row(seed, "seed", DType::kI64);
  per_row(step, "step", DType::kI64);
  per_row(out, "out", DType::kI32);
}
Status sample(const SampleParams& p, const Stream& s) {
  return dispatch(p, s, p.logits.device, cpu::sample, [](const SampleParams& q, void* h) { return cuda::sample(q, h); });
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

}  // namespace aerie::kernels
