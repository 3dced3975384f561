#include "model/sampler.hpp"

#include <cstring>

#include "kernels/error.hpp"
#include "kernels/sampling.hpp"

namespace aerie::model {

namespace {
// Layout, in units of max_batch entries: temperature f32, top_p f32, min_p f32, top_k i32,
// out i32, seed i64, step i64 (the i64 arrays last, 8-byte aligned).
constexpr int64_t kFourByteArrays = 5;
int64_t packed_bytes(int64_t b) { return b * (kFourByteArrays * 4 + 2 * 8); }
}  // namespace

Sampler::Sampler(Device device, int64_t max_batch)
    : max_batch_(max_batch),
      device_(device, DType::kU8, {packed_bytes(max_batch)}),
      staging_(device, static_cast<size_t>(packed_bytes(max_batch))) {
  AERIE_CHECK(max_batch > 0, "sampler needs a positive batch size");
}

std::vector<int32_t> Sampler::sample(const TensorView& logits, std::span<const SamplingRow> rows, const Stream& stream) {
  const int64_t B = static_cast<int64_t>(rows.size()), M = max_batch_;
  AERIE_CHECK(B <= M, "sampling " << B << " rows with a sampler for " << M);
  AERIE_CHECK(logits.dim(0) == B, "logits have " << logits.dim(0) << " rows for " << B << " sampling rows");
  std::vector<int32_t> out(static_cast<size_t>(B));
  if (B == 0) return out;
  char* h = staging_.as<char>();
  auto f32 = [&](int64_t a) { return reinterpret_cast<float*>(h + a * M * 4); };
  auto i32 = [&](int64_t a) { return reinterpret_cast<int32_t*>(h + a * M * 4); };
  auto i64 = [&](int64_t a) { return reinterpret_cast<int64_t*>(h + kFourByteArrays * M * 4 + a * M * 8); };
  synchronize(stream);  // the staging area may still feed the previous copy
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
  char* d = static_cast<char*>(device_.data());
  const Device dev = logits.device;
  auto view = [&](int64_t offset, DType t) { return TensorView(d + offset, t, {B}, dev); };
  const TensorView out_view = view(4 * M * 4, DType::kI32);
  AERIE_CHECK_STATUS(kernels::sample({.logits = logits, .temperature = view(0, DType::kF32), .top_p = view(M * 4, DType::kF32),
                                      .top_k = view(3 * M * 4, DType::kI32), .min_p = view(2 * M * 4, DType::kF32),
                                      .seed = view(kFourByteArrays * M * 4, DType::kI64),
                                      .step = view(kFourByteArrays * M * 4 + M * 8, DType::kI64), .out = out_view},
                                     stream));
  copy_async(h, out_view.data, static_cast<size_t>(B) * 4, stream);
  synchronize(stream);
  std::memcpy(out.data(), h, static_cast<size_t>(B) * 4);
  return out;
}

}  // namespace aerie::model
