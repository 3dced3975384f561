#include "model/sampler.hpp"

#include <cstring>

#include "kernels/error.hpp"
#include "kernels/sampling.hpp"

namespace aerie::model {

namespace {
// Layout, in units of max_batch entries: seed i64, step i64 (first, so 8-byte aligned),
// then temperature f32, top_p f32, min_p f32, top_k i32, out i32.
constexpr int64_t kFourByteArrays = 5;
int64_t packed_bytes(int64_t b) { return b * (2 * 8 + kFourByteArrays * 4); }
}  // namespace

Sampler::Sampler(Device device, int64_t max_batch)
    : max_batch_(max_batch),
      device_(device, DType::kU8, {packed_bytes(max_batch)}),
      workspace_(device, DType::kF32, {kernels::sample_workspace_floats(max_batch)}),
      staging_(device, static_cast<size_t>(packed_bytes(max_batch))),
      ids_host_(device, static_cast<size_t>(max_batch) * 4) {
  AERIE_CHECK(max_batch > 0, "sampler needs a positive batch size");
}

TensorView Sampler::sample_on_device(const TensorView& logits, std::span<const SamplingRow> rows, const Stream& stream) {
  const int64_t B = static_cast<int64_t>(rows.size()), M = max_batch_;
  AERIE_CHECK(B <= M, "sampling " << B << " rows with a sampler for " << M);
  AERIE_CHECK(logits.dim(0) == B, "logits have " << logits.dim(0) << " rows for " << B << " sampling rows");
  char* d = static_cast<char*>(device_.data());
  const Device dev = logits.device;
  auto view = [&](int64_t offset, DType t) { return TensorView(d + offset, t, {B}, dev); };
  // Byte offsets of the arrays.
  auto i64_at = [&](int64_t a) { return a * M * 8; };
  auto b4_at = [&](int64_t a) { return 2 * M * 8 + a * M * 4; };
  const TensorView out_view = last_ids_on_device(B);
  if (B == 0) return out_view;
  // The ring's next host area is free once its last copy ran: the parameters are written
  // while the forward (and under overlap scheduling the batch before it) still runs.
  char* h = staging_.acquire_as<char>();
  auto f32 = [&](int64_t a) { return reinterpret_cast<float*>(h + b4_at(a)); };
  auto i32 = [&](int64_t a) { return reinterpret_cast<int32_t*>(h + b4_at(a)); };
  auto i64 = [&](int64_t a) { return reinterpret_cast<int64_t*>(h + i64_at(a)); };
  for (int64_t i = 0; i < B; ++i) {
    const auto& r = rows[static_cast<size_t>(i)];
    f32(0)[i] = r.temperature;
    f32(1)[i] = r.top_p;
    f32(2)[i] = r.min_p;
    i32(3)[i] = r.top_k;
    i64(0)[i] = r.seed;
    i64(1)[i] = r.step;
  }
  copy_async(device_.data(), h, static_cast<size_t>(packed_bytes(M)), stream);
  staging_.release(stream);
  AERIE_CHECK_STATUS(kernels::sample({.logits = logits, .temperature = view(b4_at(0), DType::kF32), .top_p = view(b4_at(1), DType::kF32),
                                      .top_k = view(b4_at(3), DType::kI32), .min_p = view(b4_at(2), DType::kF32),
                                      .seed = view(i64_at(0), DType::kI64), .step = view(i64_at(1), DType::kI64), .out = out_view,
                                      .workspace = workspace_.view().slice_rows(0, kernels::sample_workspace_floats(B))},
                                     stream));
  return out_view;
}

TensorView Sampler::last_ids_on_device(int64_t rows) const {
  AERIE_CHECK(rows >= 0 && rows <= max_batch_, "the sampler holds at most " << max_batch_ << " ids");
  const int64_t out_at = 2 * max_batch_ * 8 + (kFourByteArrays - 1) * max_batch_ * 4;  // the last array (see the layout above)
  return TensorView(static_cast<char*>(device_.data()) + out_at, DType::kI32, {rows}, device_.view().device);
}

std::vector<int32_t> Sampler::sample(const TensorView& logits, std::span<const SamplingRow> rows, const Stream& stream) {
  const TensorView ids = sample_on_device(logits, rows, stream);
  std::vector<int32_t> out(rows.size());
  if (out.empty()) return out;
  copy_async(ids_host_.data(), ids.data, out.size() * 4, stream);
  synchronize(stream);
  std::memcpy(out.data(), ids_host_.data(), out.size() * 4);
  return out;
}

std::vector<int32_t> ArgmaxSampler::argmax(const TensorView& logits, const Stream& stream) {
  const int64_t rows = logits.dim(0);
  if (rows == 0) return {};
  if (!sampler_ || rows_ < rows) {
    rows_ = std::max<int64_t>(rows, 2 * rows_);
    sampler_ = std::make_unique<Sampler>(device_, rows_);
  }
  const std::vector<SamplingRow> greedy(static_cast<size_t>(rows));  // temperature 0: argmax
  return sampler_->sample(logits, greedy, stream);
}

}  // namespace aerie::model
