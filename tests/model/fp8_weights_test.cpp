// Quantized draft heads (model/fp8_weights.hpp, --speculative-draft-model-quantization):
// weight-only FP8's per-row scales that span the format, round trips within half a step, the
// Buffer path equal to the host core, and EAGLE3 heads built with fp8 weights or with Q8_0
// blocks over int8 activations (w8a8_int8, CPU) giving logits close to the same head's in f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/int8_block_gemm.hpp"
#include "kernels/error.hpp"
#include "model/eagle_head.hpp"
#include "model/fp8_weights.hpp"
#include "model/llama_weights.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::model;

TEST(Fp8Weights, EachRowSpansTheRangeAndRoundTripsWithinHalfAStep) {
  std::mt19937 rng(3);
  const int64_t n = 5, k = 300;
  std::vector<float> w(static_cast<size_t>(n * k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) w[static_cast<size_t>(r * k + c)] = r == 2 ? 0.0f : normal(rng) * std::pow(10.0f, static_cast<float>(r - 3));
  std::vector<uint8_t> codes(w.size());
  std::vector<float> scales(static_cast<size_t>(n));
  quantize_fp8_rows(w.data(), n, k, codes.data(), scales.data());
  for (int64_t r = 0; r < n; ++r) {
    float amax = 0, qmax = 0;
    for (int64_t c = 0; c < k; ++c) {
      const float v = w[static_cast<size_t>(r * k + c)], q = f8e4m3_to_float(codes[static_cast<size_t>(r * k + c)]);
      amax = std::max(amax, std::fabs(v));
      qmax = std::max(qmax, std::fabs(q));
      // Half a step: 2^-4 relative for normals, half the subnormal unit (2^-10) below 2^-6.
      const float x = v / scales[static_cast<size_t>(r)];
      EXPECT_LE(std::fabs(q - x), std::max(std::fabs(x) / 16.0f, std::ldexp(1.0f, -10)) * 1.0001f) << r << "," << c;
    }
    if (r == 2) {
      EXPECT_EQ(scales[2], 1.0f);
      EXPECT_EQ(qmax, 0.0f);
    } else {
      EXPECT_FLOAT_EQ(scales[static_cast<size_t>(r)], amax / 448.0f);
      EXPECT_EQ(qmax, 448.0f) << "row " << r << " does not reach the top of the range";
    }
  }
  std::vector<float> bad = {1.0f, 2.0f, 3.0f, NAN};
  try {
    quantize_fp8_rows(bad.data(), 2, 2, codes.data(), scales.data(), 10);
    FAIL() << "a NaN weight was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 11"), std::string::npos) << e.what();
  }
}

TEST(Fp8Weights, ABufferQuantizesAsTheHostCoreAndOptionsParse) {
  std::mt19937 rng(4);
  const Buffer w = aerie::testing::random_buffer(rng, DType::kBF16, {6, 32});
  const Fp8Rows q = quantize_fp8_rows(w);
  EXPECT_EQ(q.values.view().dtype, DType::kF8E4M3);
  EXPECT_EQ(q.scales.view().dim(0), 6);
  std::vector<float> f(6 * 32);
  convert_to_float(w.data(), DType::kBF16, 6 * 32, f.data());
  std::vector<uint8_t> codes(f.size());
  std::vector<float> scales(6);
  quantize_fp8_rows(f.data(), 6, 32, codes.data(), scales.data());
  EXPECT_EQ(std::memcmp(q.values.data(), codes.data(), codes.size()), 0);
  EXPECT_EQ(std::memcmp(q.scales.data(), scales.data(), scales.size() * 4), 0);
  EXPECT_EQ(parse_draft_quantization("fp8"), DraftQuantization::kFp8);
  EXPECT_EQ(parse_draft_quantization("w8a8_int8"), DraftQuantization::kW8A8Int8);
  EXPECT_EQ(parse_draft_quantization(""), DraftQuantization::kNone);
  EXPECT_THROW(parse_draft_quantization("int4"), Error);
}

namespace {

// The logits of an EAGLE3 head for the tiny target, over six rows of one sequence, with its
// weights as given and quantized as `quantize` sets the config.
std::pair<std::vector<double>, std::vector<double>> head_logits_plain_and(void (*quantize)(EagleHeadConfig&)) {
  const auto target_cfg = LlamaConfig::named_shape("tiny");
  LlamaModel target(target_cfg, random_llama_weights(target_cfg, 3, Device::kCpu, DType::kF32), Stream::cpu(), DType::kF32);
  auto hc = EagleHeadConfig::for_target(EagleKind::kEagle3, target_cfg);
  EagleHead plain(hc, random_eagle_head(hc, 4, Device::kCpu, DType::kF32), target);
  quantize(hc);
  EagleHead quantized(hc, random_eagle_head(hc, 4, Device::kCpu, DType::kF32), target);
  KvCache kv_a(hc.layer, kv_shape_for_tokens(64, 1), Device::kCpu, DType::kF32), kv_b(hc.layer, kv_shape_for_tokens(64, 1), Device::kCpu, DType::kF32);
  ForwardBatch b;
  for (int t = 0; t < 6; ++t) {
    b.input_ids.push_back(5 + 7 * t);
    b.positions.push_back(t);
    b.out_cache_loc.push_back(1 + t);
    b.kv_indices.push_back(1 + t);
    b.logit_rows.push_back(t);
  }
  b.qo_indptr.push_back(6);
  b.kv_indptr.push_back(6);
  std::mt19937 rng(9);
  const Buffer hidden = aerie::testing::random_buffer(rng, DType::kF32, {6, hc.input_width()});
  const auto a = aerie::testing::to_double(plain.forward(b, hidden.view(), kv_a));
  return {a, aerie::testing::to_double(quantized.forward(b, hidden.view(), kv_b))};
}

}  // namespace

TEST(Fp8Weights, AnFp8HeadsLogitsStayCloseToTheSameHeadsInF32) {
  const auto [a, q] = head_logits_plain_and([](EagleHeadConfig& hc) { hc.quantization = DraftQuantization::kFp8; });
  const double err = aerie::testing::rel_error(q, a);
  EXPECT_GT(err, 0.0) << "the fp8 head computed exactly what the f32 head did: were its weights quantized?";
  EXPECT_LT(err, 0.08) << "fp8 weights moved the head's logits by more than E4M3 rounding should";
}

// w8a8_int8: Q8_0 weights and int8 activations, each rounded to 1/127 of a 32-wide block's
// largest value (about 0.4%), on AMX; refused without it (EagleHead's constructor).
TEST(Fp8Weights, AW8a8Int8HeadsLogitsStayCloseToTheSameHeadsInF32) {
  if (!kernels::cpu::amx_int8_available()) GTEST_SKIP() << "w8a8_int8 draft heads need AMX-INT8, which this CPU does not offer";
  const auto [a, q] = head_logits_plain_and([](EagleHeadConfig& hc) { hc.quantization = DraftQuantization::kW8A8Int8; });
  const double err = aerie::testing::rel_error(q, a);
  EXPECT_GT(err, 0.0) << "the w8a8_int8 head computed exactly what the f32 head did: were its weights quantized?";
  EXPECT_LT(err, 0.03) << "int8 blocks moved the head's logits by more than their rounding should";
}
