// Paged attention over a ragged batch (prefill, extend, decode mixed) against a dense
// double-precision reference; custom masks; the KV write.
#include <cstring>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/attention.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/attention_paths.hpp"
#include "kernels/matmul.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::kernels;
using aerie::testing::random_buffer;
using aerie::testing::rel_error;
using aerie::testing::to_double;

namespace {

struct Case {
  std::vector<int32_t> q_lens, kv_lens;
  std::vector<int32_t> qo, kvp, kv_indices;
  std::vector<uint8_t> mask;  // empty: causal
  std::vector<int32_t> mask_indptr;
};

Buffer host_i32(const std::vector<int32_t>& v) {
  Buffer b(Device::kCpu, DType::kI32, {static_cast<int64_t>(v.size())});
  if (!v.empty()) b.copy_from_host(v.data(), b.nbytes());
  return b;
}

Case make_case(std::mt19937& rng, std::vector<int32_t> q_lens, std::vector<int32_t> kv_lens, int64_t slots, bool masked) {
  Case c{q_lens, kv_lens, {0}, {0}, {}, {}, {}};
  std::vector<int32_t> perm(static_cast<size_t>(slots));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);  // sequences own scattered slots
  size_t next = 0;
  if (masked) c.mask_indptr.push_back(0);
  for (size_t b = 0; b < q_lens.size(); ++b) {
    c.qo.push_back(c.qo.back() + q_lens[b]);
    c.kvp.push_back(c.kvp.back() + kv_lens[b]);
    for (int32_t j = 0; j < kv_lens[b]; ++j) c.kv_indices.push_back(perm[next++]);
    if (masked) {
      for (int32_t i = 0; i < q_lens[b] * kv_lens[b]; ++i) c.mask.push_back(static_cast<uint8_t>(rng() % 3 != 0));
      c.mask_indptr.push_back(static_cast<int32_t>(c.mask.size()));
    }
  }
  return c;
}

std::vector<double> reference(const Case& c, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, int64_t qh, int64_t kh, int64_t d, double scale) {
  std::vector<double> out(q.size(), 0.0);
  for (size_t b = 0; b < c.q_lens.size(); ++b) {
    const int64_t ql = c.q_lens[b], kl = c.kv_lens[b];
    for (int64_t i = 0; i < ql; ++i)
      for (int64_t h = 0; h < qh; ++h) {
        const int64_t row = c.qo[b] + i, g = h / (qh / kh);
        std::vector<double> s;
        std::vector<int64_t> slot;
        for (int64_t j = 0; j < kl; ++j) {
          const bool vis = c.mask.empty() ? j <= kl - ql + i : c.mask[static_cast<size_t>(c.mask_indptr[b] + i * kl + j)] != 0;
          if (!vis) continue;
          const int64_t sl = c.kv_indices[static_cast<size_t>(c.kvp[b] + j)];
          double dot = 0;
          for (int64_t x = 0; x < d; ++x) dot += q[static_cast<size_t>((row * qh + h) * d + x)] * k[static_cast<size_t>((sl * kh + g) * d + x)];
          s.push_back(dot * scale);
          slot.push_back(sl);
        }
        if (s.empty()) continue;
        const double mx = *std::max_element(s.begin(), s.end());
        double den = 0;
        for (auto& e : s) den += (e = std::exp(e - mx));
        for (size_t j = 0; j < s.size(); ++j)
          for (int64_t x = 0; x < d; ++x)
            out[static_cast<size_t>((row * qh + h) * d + x)] += s[j] / den * v[static_cast<size_t>((slot[j] * kh + g) * d + x)];
      }
  }
  return out;
}

// Default: a prompt prefill (q = kv), an extend chunk over cached tokens, and two decodes.
void run_case(DType dtype, bool masked, uint32_t seed, std::vector<int32_t> q_lens = {7, 3, 1, 1},
              std::vector<int32_t> kv_lens = {7, 12, 20, 1}, int64_t slots = 80, int64_t d = 16) {
  std::mt19937 rng(seed);
  const int64_t qh = 4, kh = 2;
  Case c = make_case(rng, q_lens, kv_lens, slots, masked);
  const int64_t tokens = c.qo.back();
  Buffer q = random_buffer(rng, dtype, {tokens, qh, d}), kc = random_buffer(rng, dtype, {slots, kh, d});
  Buffer vc = random_buffer(rng, dtype, {slots, kh, d}), out(Device::kCpu, dtype, {tokens, qh, d});
  Buffer qo = host_i32(c.qo), kvp = host_i32(c.kvp), kvi = host_i32(c.kv_indices), mi = host_i32(c.mask_indptr);
  Buffer mask(Device::kCpu, DType::kU8, {static_cast<int64_t>(std::max<size_t>(1, c.mask.size()))});
  if (masked) mask.copy_from_host(c.mask.data(), static_cast<int64_t>(c.mask.size()));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  ASSERT_TRUE(attention({.q = q.view(), .k_cache = kc.view(), .v_cache = vc.view(), .out = out.view(), .qo_indptr = qo.view(),
                         .kv_indptr = kvp.view(), .kv_indices = kvi.view(),
                         .custom_mask = masked ? mask.view() : TensorView(), .mask_indptr = masked ? mi.view() : TensorView(),
                         .scale = static_cast<float>(scale)}, Stream::cpu()).is_ok());
  auto ref = reference(c, to_double(q.view()), to_double(kc.view()), to_double(vc.view()), qh, kh, d, scale);
  EXPECT_LT(rel_error(to_double(out.view()), ref), dtype == DType::kF32 ? 1e-5 : 1e-2);
}

}  // namespace

TEST(Attention, RaggedCausalBatchMatchesDenseReference) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    for (uint32_t seed : {1u, 2u, 3u}) run_case(t, false, seed);
}

TEST(Attention, CustomMaskMatchesDenseReference) {
  for (uint32_t seed : {4u, 5u, 6u}) run_case(DType::kF32, true, seed);
}

// Prefill-sized sequences (16 queries or more) go through sgemm in blocks of 64 queries when
// the build has oneDNN; the same cases with the reference loop forced go row by row.
TEST(Attention, PrefillBlocksAndRowByRowBothMatchDenseReference) {
  for (bool reference : {false, true}) {
    set_cpu_gemm_reference(reference);
    for (DType t : {DType::kF32, DType::kBF16})
      for (bool masked : {false, true}) run_case(t, masked, 7, {130, 20, 16, 3, 1}, {130, 45, 16, 20, 1}, 260);
  }
  set_cpu_gemm_reference(false);
}

// Head dims of 64 and 128 take the AVX-512 row loops where the CPU has them (decode and
// verify shapes: a few queries over keys that are not a multiple of sixteen).
TEST(Attention, HeadDims64And128MatchDenseReference) {
  for (int64_t d : {64, 128})
    for (bool masked : {false, true}) run_case(DType::kF32, masked, 11, {4, 1, 1}, {37, 16, 53}, 120, d);
}

// A query row's f32 result as the row loops document it: each dot product as sixteen lane sums
// of fused multiply-adds then the tree (lane u += lane u + w, w = 8, 4, 2, 1), softmax weights
// e^(s - max) summed in key order, P V as a fused multiply-add per key in key order, times
// 1 / denominator. The AVX-512 and AVX2 loops must give exactly these bits (then a verify row
// and the same row decoded alone agree, and machines of either kind decode alike).
TEST(Attention, RowLoopsSumInTheDocumentedOrderOnAvx512AndAvx2) {
  using cpu::CpuIsa;
  if (!cpu::cpu_has(CpuIsa::kAvx2)) GTEST_SKIP() << "neither AVX-512 nor AVX2 + FMA on this CPU";
  std::mt19937 rng(12);
  // 37 keys for 3 rows, and 150 for 5 (many groups of 16 keys, a partial last one).
  struct Lens { int64_t q_len, kv_len; };
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2})
  for (int64_t d : {64, 128})
  for (Lens lens : {Lens{3, 37}, Lens{5, 150}}) {
    if (!cpu::cpu_has(isa)) continue;
    const aerie::testing::ScopedCpuIsaCap cap(isa);
    const int64_t qh = 3, kh = 1, kv_len = lens.kv_len, q_len = lens.q_len, slots = kv_len + 3;
    Case c = make_case(rng, {static_cast<int32_t>(q_len)}, {static_cast<int32_t>(kv_len)}, slots, false);
    Buffer q = random_buffer(rng, DType::kF32, {q_len, qh, d}), kc = random_buffer(rng, DType::kF32, {slots, kh, d});
    Buffer vc = random_buffer(rng, DType::kF32, {slots, kh, d}), out(Device::kCpu, DType::kF32, {q_len, qh, d});
    Buffer qo = host_i32(c.qo), kvp = host_i32(c.kvp), kvi = host_i32(c.kv_indices);
    const float scale = 0.125f;
    ASSERT_TRUE(attention({.q = q.view(), .k_cache = kc.view(), .v_cache = vc.view(), .out = out.view(), .qo_indptr = qo.view(),
                           .kv_indptr = kvp.view(), .kv_indices = kvi.view(), .scale = scale}, Stream::cpu()).is_ok());
    const float* qp = q.view().ptr<float>();
    const float* kp = kc.view().ptr<float>();
    const float* vp = vc.view().ptr<float>();
    const float* got = out.view().ptr<float>();
    for (int64_t i = 0; i < q_len; ++i)
      for (int64_t h = 0; h < qh; ++h) {
        const float* qr = qp + (i * qh + h) * d;
        const int64_t span = kv_len - q_len + i + 1;
        std::vector<float> s(static_cast<size_t>(span));
        float mx = -INFINITY;
        for (int64_t j = 0; j < span; ++j) {
          const float* kr = kp + static_cast<int64_t>(c.kv_indices[static_cast<size_t>(j)]) * kh * d;
          float lane[16] = {};
          for (int64_t x = 0; x < d; x += 16)
            for (int u = 0; u < 16; ++u) lane[u] = std::fma(qr[x + u], kr[x + u], lane[u]);
          for (int w = 8; w >= 1; w /= 2)
            for (int u = 0; u < w; ++u) lane[u] += lane[u + w];
          s[static_cast<size_t>(j)] = lane[0] * scale;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        std::vector<float> acc(static_cast<size_t>(d), 0.0f);
        // The numerators by the kernel's own exp (vector_exp as this CPU's clone computes it);
        // the denominator in key order, checked here.
        std::vector<float> es = s;
        const float kernel_den = cpu::softmax_numerators(es.data(), span, mx);
        float den = 0.0f;
        for (int64_t j = 0; j < span; ++j) {
          const float e = es[static_cast<size_t>(j)];
          EXPECT_NEAR(e, std::exp(s[static_cast<size_t>(j)] - mx), 4e-7f * std::exp(s[static_cast<size_t>(j)] - mx) + 1e-30f);
          den += e;
          const float* vr = vp + static_cast<int64_t>(c.kv_indices[static_cast<size_t>(j)]) * kh * d;
          for (int64_t x = 0; x < d; ++x) acc[static_cast<size_t>(x)] = std::fma(e, vr[x], acc[static_cast<size_t>(x)]);
        }
        EXPECT_EQ(kernel_den, den);
        const float inv = 1.0f / den;
        for (int64_t x = 0; x < d; ++x)
          EXPECT_EQ(got[(i * qh + h) * d + x], acc[static_cast<size_t>(x)] * inv)
              << (isa == CpuIsa::kAvx2 ? "AVX2" : "AVX-512") << ", dim " << d << ", " << kv_len << " keys, query " << i << ", head " << h
              << ", " << x;
      }
  }
}

// Head dims 8 (the generic loops) and 64 (the AVX-512 or AVX2 row loops where the CPU has them);
// contexts under and over sixteen keys (the masked scaling's vector body and its tail).
TEST(Attention, CausalMaskGivenExplicitlyEqualsTheDefault) {
  for (const int64_t d : {8, 64})
  for (const int32_t long_kv : {5, 37}) {
    std::mt19937 rng(9);
    const int64_t qh = 2, kh = 1, slots = 64;
    Case c = make_case(rng, {3, 2}, {long_kv, 4}, slots, false);
    std::vector<uint8_t> mask;
    std::vector<int32_t> mi = {0};
    for (size_t b = 0; b < 2; ++b) {
      for (int32_t i = 0; i < c.q_lens[b]; ++i)
        for (int32_t j = 0; j < c.kv_lens[b]; ++j) mask.push_back(j <= c.kv_lens[b] - c.q_lens[b] + i);
      mi.push_back(static_cast<int32_t>(mask.size()));
    }
    Buffer q = random_buffer(rng, DType::kF32, {5, qh, d}), kc = random_buffer(rng, DType::kF32, {slots, kh, d});
    Buffer vc = random_buffer(rng, DType::kF32, {slots, kh, d});
    Buffer a(Device::kCpu, DType::kF32, {5, qh, d}), b(Device::kCpu, DType::kF32, {5, qh, d});
    Buffer qo = host_i32(c.qo), kvp = host_i32(c.kvp), kvi = host_i32(c.kv_indices), mib = host_i32(mi);
    Buffer m(Device::kCpu, DType::kU8, {static_cast<int64_t>(mask.size())});
    m.copy_from_host(mask.data(), m.nbytes());
    AttentionParams p{.q = q.view(), .k_cache = kc.view(), .v_cache = vc.view(), .out = a.view(), .qo_indptr = qo.view(),
                      .kv_indptr = kvp.view(), .kv_indices = kvi.view(), .scale = 0.3f};
    ASSERT_TRUE(attention(p, Stream::cpu()).is_ok());
    p.out = b.view();
    p.custom_mask = m.view();
    p.mask_indptr = mib.view();
    ASSERT_TRUE(attention(p, Stream::cpu()).is_ok());
    EXPECT_EQ(to_double(a.view()), to_double(b.view())) << "head dim " << d << ", " << long_kv << " keys";
  }
}

TEST(Attention, RejectsSlotsOutsideTheCache) {
  Buffer q(Device::kCpu, DType::kF32, {1, 1, 4}), kc(Device::kCpu, DType::kF32, {2, 1, 4}), vc(Device::kCpu, DType::kF32, {2, 1, 4});
  Buffer out(Device::kCpu, DType::kF32, {1, 1, 4});
  Buffer qo = host_i32({0, 1}), kvp = host_i32({0, 1}), kvi = host_i32({5});
  Status s = attention({.q = q.view(), .k_cache = kc.view(), .v_cache = vc.view(), .out = out.view(), .qo_indptr = qo.view(),
                        .kv_indptr = kvp.view(), .kv_indices = kvi.view()}, Stream::cpu());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("outside the cache"), std::string::npos);
}

TEST(KvWrite, WritesRowsToTheirSlots) {
  std::mt19937 rng(3);
  Buffer k = random_buffer(rng, DType::kF32, {2, 2, 4}), v = random_buffer(rng, DType::kF32, {2, 2, 4});
  Buffer kc(Device::kCpu, DType::kBF16, {5, 2, 4}), vc(Device::kCpu, DType::kBF16, {5, 2, 4});
  kc.zero();
  vc.zero();
  Buffer slots = host_i32({4, 1});
  ASSERT_TRUE(kv_write({.k = k.view(), .v = v.view(), .slots = slots.view(), .k_cache = kc.view(), .v_cache = vc.view()},
                       Stream::cpu()).is_ok());
  auto kd = to_double(k.view()), kcd = to_double(kc.view());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(kcd[static_cast<size_t>(4 * 8 + i)], bf16_to_float(float_to_bf16(static_cast<float>(kd[static_cast<size_t>(i)]))));
    EXPECT_EQ(kcd[static_cast<size_t>(1 * 8 + i)], bf16_to_float(float_to_bf16(static_cast<float>(kd[static_cast<size_t>(8 + i)]))));
    EXPECT_EQ(kcd[static_cast<size_t>(0 * 8 + i)], 0.0);
  }
  Buffer bad = host_i32({5, 0});
  EXPECT_FALSE(kv_write({.k = k.view(), .v = v.view(), .slots = bad.view(), .k_cache = kc.view(), .v_cache = vc.view()},
                        Stream::cpu()).is_ok());
}

// Rows already in the cache's dtype are copied as they are (the fast path): every bit, k and v,
// other slots untouched, for f32 and bf16 caches.
TEST(KvWrite, RowsOfTheCachesDtypeLandBitForBit) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    std::mt19937 rng(5);
    Buffer k = random_buffer(rng, dt, {3, 2, 8}), v = random_buffer(rng, dt, {3, 2, 8});
    Buffer kc(Device::kCpu, dt, {6, 2, 8}), vc(Device::kCpu, dt, {6, 2, 8});
    kc.zero();
    vc.zero();
    Buffer slots = host_i32({2, 5, 0});
    ASSERT_TRUE(kv_write({.k = k.view(), .v = v.view(), .slots = slots.view(), .k_cache = kc.view(), .v_cache = vc.view()},
                         Stream::cpu()).is_ok());
    const size_t row = 16 * dtype_size(dt);
    const auto* kb = static_cast<const unsigned char*>(k.view().data);
    const auto* vb = static_cast<const unsigned char*>(v.view().data);
    const auto* kcb = static_cast<const unsigned char*>(kc.view().data);
    const auto* vcb = static_cast<const unsigned char*>(vc.view().data);
    const int slot_of[3] = {2, 5, 0};
    for (int t = 0; t < 3; ++t) {
      EXPECT_EQ(std::memcmp(kcb + slot_of[t] * row, kb + t * row, row), 0) << "k row " << t;
      EXPECT_EQ(std::memcmp(vcb + slot_of[t] * row, vb + t * row, row), 0) << "v row " << t;
    }
    const std::vector<unsigned char> zeros(row, 0);
    for (int untouched : {1, 3, 4}) {
      EXPECT_EQ(std::memcmp(kcb + untouched * row, zeros.data(), row), 0);
      EXPECT_EQ(std::memcmp(vcb + untouched * row, zeros.data(), row), 0);
    }
  }
}

TEST(KvMove, MovesRowsInOrderInEveryLayer) {
  std::mt19937 rng(4);
  std::vector<Buffer> kc, vc;  // three layers
  for (int l = 0; l < 3; ++l) kc.push_back(random_buffer(rng, DType::kF32, {6, 2, 4})), vc.push_back(random_buffer(rng, DType::kF32, {6, 2, 4}));
  std::vector<std::vector<double>> k0, v0;
  std::vector<TensorView> ks, vs;
  for (int l = 0; l < 3; ++l) k0.push_back(to_double(kc[l].view())), v0.push_back(to_double(vc[l].view())), ks.push_back(kc[l].view()), vs.push_back(vc[l].view());
  // 3 -> 1, then 4 -> 3 (a row read after an earlier move's read of it), then 5 -> 5.
  Buffer src = host_i32({3, 4, 5}), dst = host_i32({1, 3, 5});
  ASSERT_TRUE(kv_move({.src_slots = src.view(), .dst_slots = dst.view(), .k_caches = ks, .v_caches = vs}, Stream::cpu()).is_ok());
  const int want[6] = {0, 3, 2, 4, 4, 5};  // the original row each slot holds now
  for (int l = 0; l < 3; ++l) {
    const auto k1 = to_double(kc[l].view()), v1 = to_double(vc[l].view());
    for (int s = 0; s < 6; ++s)
      for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(k1[static_cast<size_t>(s * 8 + i)], k0[l][static_cast<size_t>(want[s] * 8 + i)]) << "layer " << l << " slot " << s;
        EXPECT_EQ(v1[static_cast<size_t>(s * 8 + i)], v0[l][static_cast<size_t>(want[s] * 8 + i)]) << "layer " << l << " slot " << s;
      }
  }
  Buffer bad = host_i32({6});
  Buffer one = host_i32({0});
  EXPECT_FALSE(kv_move({.src_slots = bad.view(), .dst_slots = one.view(), .k_caches = ks, .v_caches = vs}, Stream::cpu()).is_ok());
  // Every layer's cache must have the same rows.
  Buffer small = random_buffer(rng, DType::kF32, {5, 2, 4});
  EXPECT_THROW(kv_move({.src_slots = src.view(), .dst_slots = dst.view(), .k_caches = {ks[0], small.view()}, .v_caches = {vs[0], vs[1]}}, Stream::cpu()),
               Error);
}

TEST(AttentionPlan, TokensPerBlockFollowTheMeasuredPolicyAndTheKernelsLimits) {
  using V = std::vector<int64_t>;
  auto tpb = [](const V& q, int64_t group, int forced = 0) { return attention_tokens_per_block_for(q, group, 8, 132, forced); };
  EXPECT_EQ(tpb({1}, 4), 1);                      // decode
  EXPECT_EQ(tpb(V(64, 1), 4), 1);                 // a decode batch: one token per sequence
  EXPECT_EQ(tpb({2}, 4), 1);                      // up to 4 tokens in all: one per block
  EXPECT_EQ(tpb({4}, 4), 1);
  EXPECT_EQ(tpb({8}, 4), 2);                      // a batch-1 verify of 8 (64 one-token blocks)
  EXPECT_EQ(attention_tokens_per_block_for(V{6}, 3, 3, 132), 1);   // SmolLM2's verify of 6: 18 one-token blocks
  EXPECT_EQ(attention_tokens_per_block_for(V{8}, 3, 3, 132), 2);   // of 8: 24
  EXPECT_EQ(tpb(V(8, 4), 4), 2);                  // batch 8 x 4 tokens
  EXPECT_EQ(tpb(V(32, 4), 4), 2);                 // 32 blocks of 4 x 8 KV heads < 2 x 132 SMs
  EXPECT_EQ(tpb(V(32, 8), 4), 4);                 // 64 x 8 >= 264: 4 per block
  EXPECT_EQ(tpb({2, 4, 6}, 4), 2);                // mixed even counts
  EXPECT_EQ(tpb({3, 3}, 4), 1);                   // odd counts
  EXPECT_EQ(tpb({100, 4}, 4), 1);                 // a prefill chunk in the batch
  EXPECT_EQ(tpb({8}, 16), 1);                     // a GQA group over 8 heads: blocks serve one token
  EXPECT_EQ(tpb({8}, 8), 2);                      // 8 heads x 2 tokens = 16 rows
  EXPECT_EQ(tpb(V(32, 8), 8), 4);                 // 8 heads x 4 tokens = 32 rows
  EXPECT_EQ(tpb({8}, 4, 8), 8);                   // forced: 4 heads x 8 tokens = 32 rows fit
  EXPECT_EQ(tpb({8}, 8, 8), 1);                   // forced: 64 rows do not
  EXPECT_EQ(tpb({6}, 4, 4), 1);                   // forced: 4 does not divide 6
  EXPECT_TRUE(attention_tokens_per_block_fits(1, 64, V{7}));
  EXPECT_FALSE(attention_tokens_per_block_fits(0, 4, V{8}));
}

// Which CUDA batches the tensor-core decode kernel takes (a host-side rule: no GPU needed):
// those whose blocks fill the GPU and those of at most kAttentionDecodeTcSmallBlocks blocks.
TEST(AttentionPlan, DecodeOnTensorCoresTakesHalfPrecisionBatchesThatFitOneMmaTileAndFillTheGpuOrAreSmall) {
  auto params = [](DType t, int64_t tokens, int64_t qh, int64_t kh, int64_t dim, int tpb, DType cache = DType::kF32) {
    if (cache == DType::kF32) cache = t;
    return AttentionParams{.q = TensorView(nullptr, t, {tokens, qh, dim}, Device::kCuda),
                           .k_cache = TensorView(nullptr, cache, {4096, kh, dim}, Device::kCuda),
                           .v_cache = TensorView(nullptr, cache, {4096, kh, dim}, Device::kCuda),
                           .out = TensorView(nullptr, t, {tokens, qh, dim}, Device::kCuda), .tokens_per_block = tpb};
  };
  const int sms = 132;
  EXPECT_TRUE(attention_decode_on_tensor_cores(params(DType::kBF16, 32, 32, 8, 128, 1), sms));   // 32 x 8 blocks
  EXPECT_TRUE(attention_decode_on_tensor_cores(params(DType::kF16, 128, 32, 8, 128, 4), sms));   // 4 x 4 = 16 rows
  EXPECT_TRUE(attention_decode_on_tensor_cores(params(DType::kBF16, 64, 9, 3, 64, 1), sms));     // SmolLM2's heads
  EXPECT_FALSE(attention_decode_on_tensor_cores(params(DType::kBF16, 8, 32, 8, 128, 1), sms));   // 64 blocks < 132 SMs
  EXPECT_FALSE(attention_decode_on_tensor_cores(params(DType::kBF16, 4, 32, 8, 128, 1), sms));   // 32 blocks: neither
  EXPECT_TRUE(attention_decode_on_tensor_cores(params(DType::kBF16, 2, 32, 8, 128, 1), sms));    // 16 blocks: small
  EXPECT_TRUE(attention_decode_on_tensor_cores(params(DType::kBF16, 1, 32, 8, 128, 1), sms));    // an 8B batch of one
  EXPECT_TRUE(attention_decode_on_tensor_cores(params(DType::kBF16, 6, 9, 3, 64, 2), sms));      // SmolLM2's verify of 6
  // In one-token blocks: 18 of them, sequences of several tokens (a verify), or one token each.
  Buffer one_seq = host_i32({0, 6});
  Buffer six_seqs = host_i32({0, 1, 2, 3, 4, 5, 6});
  AttentionParams verify = params(DType::kBF16, 6, 9, 3, 64, 1);
  verify.qo_indptr = TensorView(one_seq.data(), DType::kI32, {2}, Device::kCuda);
  EXPECT_TRUE(attention_decode_on_tensor_cores(verify, sms));
  verify.qo_indptr = TensorView(six_seqs.data(), DType::kI32, {7}, Device::kCuda);
  EXPECT_FALSE(attention_decode_on_tensor_cores(verify, sms));                                   // a decode batch of 6: 18 > 16
  // Past 18 one-token blocks only where no larger block fits: SmolLM2's chain-6 verify of 7
  // (21 blocks) as its decode steps, on tensor cores, up to 24 blocks; a verify of 9 (27) not.
  EXPECT_EQ(attention_tokens_per_block_for(std::vector<int64_t>{7}, 3, 3, sms), 1);
  for (const int tokens : {7, 8, 9}) {
    Buffer one_of = host_i32({0, tokens});
    AttentionParams p = params(DType::kBF16, tokens, 9, 3, 64, 1);
    p.qo_indptr = TensorView(one_of.data(), DType::kI32, {2}, Device::kCuda);
    EXPECT_EQ(attention_decode_on_tensor_cores(p, sms), tokens * 3 <= 24) << tokens << " tokens in one-token blocks";
  }
  EXPECT_FALSE(attention_decode_on_tensor_cores(params(DType::kBF16, 256, 32, 8, 128, 8), sms)); // 32 rows
  EXPECT_FALSE(attention_decode_on_tensor_cores(params(DType::kBF16, 64, 32, 2, 128, 1), sms));  // a group of 16
  EXPECT_FALSE(attention_decode_on_tensor_cores(params(DType::kBF16, 64, 8, 8, 256, 1), sms));   // head dim 256
  EXPECT_FALSE(attention_decode_on_tensor_cores(params(DType::kF32, 64, 32, 8, 128, 1), sms));   // f32
  EXPECT_FALSE(attention_decode_on_tensor_cores(params(DType::kBF16, 64, 32, 8, 128, 1, DType::kF16), sms));  // mixed
  AttentionParams cpu = params(DType::kBF16, 64, 32, 8, 128, 1);
  cpu.q.device = Device::kCpu;
  EXPECT_FALSE(attention_decode_on_tensor_cores(cpu, sms));
}

// The split policy (blocks_per_sm = 0): about 8 blocks per SM while the query blocks are fewer
// than the SMs, no split once they fill them; at least 32 keys a split; forced counts as given.
TEST(AttentionPlan, SplitsAimAtEightBlocksPerSmForSmallBatchesAndNoneForFullOnes) {
  const int sms = 132;
  EXPECT_EQ(attention_splits_for(1, 8, 544, sms, 0), 17);    // 8 blocks: capped by 544 / 32 keys
  EXPECT_EQ(attention_splits_for(8, 8, 544, sms, 0), 17);    // 64 blocks: ceil(8 x 132 / 64)
  EXPECT_EQ(attention_splits_for(32, 8, 544, sms, 0), 1);    // 256 blocks fill 132 SMs: one split
  EXPECT_EQ(attention_splits_for(17, 8, 544, sms, 0), 1);    // 136 blocks: just past the SMs
  EXPECT_EQ(attention_splits_for(128, 8, 544, sms, 0), 1);
  EXPECT_EQ(attention_splits_for(16, 8, 544, sms, 0), 9);    // 128 blocks < 132: ceil(8 x 132 / 128)
  EXPECT_EQ(attention_splits_for(1, 8, 40, sms, 0), 2);      // 40 keys: two splits at most
  EXPECT_EQ(attention_splits_for(1, 1, 1 << 20, sms, 0), kMaxAttentionSplits);
  EXPECT_EQ(attention_splits_for(32, 8, 544, sms, 8), 5);    // forced 8 blocks per SM
}
