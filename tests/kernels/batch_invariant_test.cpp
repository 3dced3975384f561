// Batch-invariant kernels (--enable-deterministic-inference, kernels/batch_invariant.hpp): the
// CUDA policies the switch pins (attention splits, one token a block, the decode kernel for every
// batch, the GEMV by K alone), tested on the host; and on the CPU backend, a row of a product or
// of attention equal, bit for bit, to the same row computed alone, at every row count.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/batch_invariant.hpp"
#include "kernels/cpu/small_batch_gemm.hpp"
#include "kernels/gemv_rules.hpp"
#include "kernels/matmul.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::kernels;
using aerie::testing::random_buffer;

namespace {

// The switch on for one test, off again after it (it is process-wide).
struct BatchInvariantScope {
  BatchInvariantScope() { set_batch_invariant(true); }
  ~BatchInvariantScope() { set_batch_invariant(false); }
};

Buffer host_i32(const std::vector<int32_t>& v) {
  Buffer b(Device::kCpu, DType::kI32, {static_cast<int64_t>(v.size())});
  b.copy_from_host(v.data(), b.nbytes());
  return b;
}

std::vector<float> host_floats(const Buffer& b) {
  std::vector<float> v(static_cast<size_t>(b.view().numel()));
  b.copy_to_host(v.data(), b.nbytes());
  return v;
}

AttentionParams cuda_params(DType t, int64_t tokens, int64_t qh, int64_t kh, int64_t dim, int tpb) {
  return AttentionParams{.q = TensorView(nullptr, t, {tokens, qh, dim}, Device::kCuda),
                         .k_cache = TensorView(nullptr, t, {4096, kh, dim}, Device::kCuda),
                         .v_cache = TensorView(nullptr, t, {4096, kh, dim}, Device::kCuda),
                         .out = TensorView(nullptr, t, {tokens, qh, dim}, Device::kCuda), .tokens_per_block = tpb};
}

}  // namespace

TEST(BatchInvariant, IsOffUntilSetAndFollowsTheSwitch) {
  EXPECT_FALSE(batch_invariant());
  {
    BatchInvariantScope on;
    EXPECT_TRUE(batch_invariant());
  }
  EXPECT_FALSE(batch_invariant());
}

TEST(BatchInvariant, AttentionSplitsAre32KeysEachForTheLongestSequenceAtLeastTwoAtMost64) {
  EXPECT_EQ(batch_invariant_attention_splits(0), 2);
  EXPECT_EQ(batch_invariant_attention_splits(1), 2);      // at least two: every row goes through the merge
  EXPECT_EQ(batch_invariant_attention_splits(64), 2);
  EXPECT_EQ(batch_invariant_attention_splits(65), 3);
  EXPECT_EQ(batch_invariant_attention_splits(544), 17);
  EXPECT_EQ(batch_invariant_attention_splits(2048), 64);
  EXPECT_EQ(batch_invariant_attention_splits(2049), kMaxAttentionSplits);
  EXPECT_EQ(batch_invariant_attention_splits(int64_t{1} << 20), kMaxAttentionSplits);
}

TEST(BatchInvariant, AttentionPolicyNoLongerLooksAtTheBatch) {
  using V = std::vector<int64_t>;
  const int sms = 132;
  // Off: the measured policy (kernels/attention.hpp), which depends on the batch.
  EXPECT_EQ(attention_tokens_per_block_for(V(32, 8), 4, 8, sms), 4);
  EXPECT_EQ(attention_splits_for(32, 8, 544, sms), 1);
  EXPECT_FALSE(attention_decode_on_tensor_cores(cuda_params(DType::kBF16, 4, 32, 8, 128, 1), sms));  // 32 blocks
  BatchInvariantScope on;
  for (const V& q_lens : {V{1}, V(8, 1), V{8}, V(32, 8), V{100, 4}, V{3, 3}})
    EXPECT_EQ(attention_tokens_per_block_for(q_lens, 4, 8, sms), 1) << q_lens.size();
  for (const int64_t query_blocks : {1, 8, 32, 128, 4096}) {
    EXPECT_EQ(attention_splits_for(query_blocks, 8, 544, sms), 17) << query_blocks;
    EXPECT_EQ(attention_splits_for(query_blocks, 3, 40, sms), 2) << query_blocks;
  }
  // The tensor-core decode kernel wherever the model fits it, at every batch; never the prefill kernel.
  for (const int64_t tokens : {1, 4, 8, 40, 512, 4096}) {
    EXPECT_TRUE(attention_decode_on_tensor_cores(cuda_params(DType::kBF16, tokens, 32, 8, 128, 1), sms)) << tokens;
    EXPECT_TRUE(attention_decode_on_tensor_cores(cuda_params(DType::kBF16, tokens, 9, 3, 64, 1), sms)) << tokens;
    EXPECT_FALSE(attention_decode_on_tensor_cores(cuda_params(DType::kF32, tokens, 32, 8, 128, 1), sms)) << tokens;
    EXPECT_FALSE(attention_decode_on_tensor_cores(cuda_params(DType::kBF16, tokens, 32, 2, 128, 1), sms)) << "group 16";
  }
  Buffer prompt = host_i32({0, 512});
  AttentionParams prefill = cuda_params(DType::kBF16, 512, 32, 8, 128, 1);
  prefill.qo_indptr = TensorView(prompt.data(), DType::kI32, {2}, Device::kCuda);
  EXPECT_FALSE(attention_prefill_on_tensor_cores(prefill));
}

TEST(BatchInvariant, GemvFollowsTheWeightsKAlone) {
  const GemvRules r;
  // SmolLM2's products and LM head, its EAGLE-3 head's q/k/v (K = 1152), the 8B shape's down_proj.
  for (const int64_t k : {576, 1536, 1152, 14336}) {
    EXPECT_EQ(batch_invariant_gemv_kernel(k, false, r), GemvKernel::kTensorCore) << k;
    EXPECT_EQ(batch_invariant_gemv_kernel(k, true, r), GemvKernel::kTensorCore) << k;
  }
  EXPECT_EQ(batch_invariant_gemv_kernel(584, false, r), GemvKernel::kCudaCore);  // not whole 32-wide steps
  EXPECT_EQ(batch_invariant_gemv_kernel(608, true, r), GemvKernel::kCudaCore);   // fp8: not whole 64-wide steps
  EXPECT_EQ(batch_invariant_gemv_kernel(608, false, r), GemvKernel::kTensorCore);
  GemvRules no_mma;
  no_mma.tensor_cores = false;
  EXPECT_EQ(batch_invariant_gemv_kernel(576, false, no_mma), GemvKernel::kCudaCore);
  EXPECT_EQ(batch_invariant_gemv_chunk_rows(GemvKernel::kTensorCore, false), 16);
  EXPECT_EQ(batch_invariant_gemv_chunk_rows(GemvKernel::kTensorCore, true), 8);
  EXPECT_EQ(batch_invariant_gemv_chunk_rows(GemvKernel::kCudaCore, false), 8);
}

// The CPU backend: each of m rows of a product (f32, bf16 weights, Q8_0 blocks) equals, bit for
// bit, that row multiplied alone, at row counts past the small-batch kernel's 16.
TEST(BatchInvariant, CpuProductRowsEqualOneRowProductsBitForBit) {
  if (!cpu::small_batch_gemm_available()) GTEST_SKIP() << "no AVX2 / AVX-512: the CPU products take the reference loop";
  BatchInvariantScope on;
  std::mt19937 rng(21);
  const int64_t n = 96, k = 320;
  Buffer w32 = random_buffer(rng, DType::kF32, {n, k}), w16 = random_buffer(rng, DType::kBF16, {n, k});
  std::vector<float> wf(static_cast<size_t>(n * k));
  w32.copy_to_host(wf.data(), w32.nbytes());
  Buffer block_bytes(Device::kCpu, DType::kU8, {n, block_row_bytes(BlockFormat::kQ8_0, k)});
  quantize_q8_0_blocks(wf.data(), n, k, static_cast<unsigned char*>(block_bytes.data()));
  const WeightBlocks blocks{.bytes = block_bytes.view(), .format = BlockFormat::kQ8_0, .layout = BlockLayout::kRows};
  for (const int64_t m : {1, 7, 16, 17, 40, 100}) {
    Buffer x = random_buffer(rng, DType::kF32, {m, k});
    for (int weights = 0; weights < 3; ++weights) {
      MatmulParams p{.x = x.view(), .w = weights == 1 ? w16.view() : w32.view()};
      if (weights == 2) p.w_blocks = blocks;
      Buffer y(Device::kCpu, DType::kF32, {m, n});
      p.y = y.view();
      ASSERT_TRUE(matmul(p, Stream::cpu()).is_ok());
      const std::vector<float> all = host_floats(y);
      for (int64_t r = 0; r < m; ++r) {
        Buffer y1(Device::kCpu, DType::kF32, {1, n});
        MatmulParams one = p;
        one.x = x.view().slice_rows(r, r + 1);
        one.y = y1.view();
        ASSERT_TRUE(matmul(one, Stream::cpu()).is_ok());
        const std::vector<float> alone = host_floats(y1);
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(all[static_cast<size_t>(r * n + j)], alone[static_cast<size_t>(j)])
              << "row " << r << " of " << m << ", weights " << weights << ", column " << j;
      }
    }
  }
}

// CPU attention: a prompt's rows (130 queries, which the blocked sgemm path would take) equal,
// bit for bit, each query attended as a one-token decode over the keys it sees.
TEST(BatchInvariant, CpuAttentionPromptRowsEqualOneTokenRows) {
  BatchInvariantScope on;
  std::mt19937 rng(5);
  const int64_t qh = 4, kh = 2, d = 64, len = 130;
  Buffer q = random_buffer(rng, DType::kF32, {len, qh, d}), kc = random_buffer(rng, DType::kF32, {len, kh, d});
  Buffer vc = random_buffer(rng, DType::kF32, {len, kh, d}), out(Device::kCpu, DType::kF32, {len, qh, d});
  std::vector<int32_t> slots(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  Buffer qo = host_i32({0, static_cast<int32_t>(len)}), kvp = host_i32({0, static_cast<int32_t>(len)}), kvi = host_i32(slots);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  ASSERT_TRUE(attention({.q = q.view(), .k_cache = kc.view(), .v_cache = vc.view(), .out = out.view(), .qo_indptr = qo.view(),
                         .kv_indptr = kvp.view(), .kv_indices = kvi.view(), .scale = scale}, Stream::cpu()).is_ok());
  const std::vector<float> prompt = host_floats(out);
  for (int64_t i = 0; i < len; i += 13) {
    Buffer one(Device::kCpu, DType::kF32, {1, qh, d});
    Buffer qo1 = host_i32({0, 1}), kvp1 = host_i32({0, static_cast<int32_t>(i + 1)});
    ASSERT_TRUE(attention({.q = q.view().slice_rows(i, i + 1), .k_cache = kc.view(), .v_cache = vc.view(), .out = one.view(),
                           .qo_indptr = qo1.view(), .kv_indptr = kvp1.view(), .kv_indices = kvi.view().slice_rows(0, i + 1), .scale = scale},
                          Stream::cpu()).is_ok());
    const std::vector<float> alone = host_floats(one);
    for (int64_t j = 0; j < qh * d; ++j)
      ASSERT_EQ(prompt[static_cast<size_t>(i * qh * d + j)], alone[static_cast<size_t>(j)]) << "query " << i << " element " << j;
  }
}
