#pragma once
// Which of the CUDA backend's GEMVs computes a product of few input rows (1-16; more go to
// cuBLAS): the CUDA-core GEMV (a block per few weight rows, threads splitting K) or the
// tensor-core one (16 weight rows a block, mma.m16n8k16). Host code, so the rules are tested
// on the CPU; kernels/cuda/ops_matmul.cu launches what they say (docs/cuda-backend.md).
//
// Each GEMV sums an output row the same way whatever the number of input rows, so where the
// rules give one kernel for one row and for a verify's rows, the verify computes each row exactly
// as a plain decode step does (greedy speculative answers equal plain decoding's in bf16).
#include <cstdint>

namespace aerie::kernels {

enum class GemvKernel { kCudaCore, kTensorCore };

// Measured on an H200 (docs/performance.md, "Which GEMV a small product takes").
struct GemvRules {
  // One or two rows over a short K and more weight rows than a few take the tensor cores: a
  // CUDA-core block of two 576-wide weight rows holds too few bytes to hide the latency
  // (SmolLM2's decode step 0.652-0.658 -> 0.602-0.605 ms with its q/k/v and gate/up there).
  // Two rows read each weight twice as usefully: there K up to 2048 pays too (the 1B shape's
  // decode step at batch 2 1.059 -> 0.995-1.008 ms), at one row it did not (0.94 -> 0.96-0.97).
  bool short_k_on_tensor_cores = true;  // AERIE_GEMV_SHORT_K_MMA=0 turns it off
  int64_t short_k_max = 1023;           // one row; AERIE_GEMV_SHORT_K_MAX sets both
  int64_t short_k_max_two_rows = 2048;  // AERIE_GEMV_SHORT_K_MAX_TWO_ROWS
  int64_t short_k_min_rows = 577;       // AERIE_GEMV_SHORT_K_MMA_MIN_N
  // 3-8 rows over few weight rows take the CUDA-core GEMV at two weight rows a block (36
  // tensor-core blocks of 16 leave most SMs idle: SmolLM2's decode at batch 3-5 7% faster).
  int64_t narrow_max_rows = 576;        // AERIE_GEMV_NARROW_CUDA_CORE_N (0: none)
  bool tensor_cores = true;             // AERIE_GEMV_MMA=0: no tensor-core GEMV (3-8 rows on CUDA cores)
  // 17 to chunked_max_rows rows over a weight of at most chunked_max_weight_bytes take the
  // tensor-core GEMV in chunks of 16 rows (one launch) instead of cuBLASLt: a small model's
  // verify at batch 8, its mixed batches (decodes + a prompt chunk) and prompt extends, where
  // cuBLASLt also costs host time for every new row count. Measured on an H100 (docs/performance.md,
  // fortieth session): SmolLM2's products 1.04-1.66x faster alone at 17-64 rows, even at 96-128
  // (tied, gate/up slower), slower at 256; the 1B shape's 8 MiB o_proj slower past 32 rows; through
  // the engine at batch 8 plain decoding +17%, chains of 3-5 +17-27%, the tree unchanged with 128
  // rows (+12% plain with 64, and 256 below 128).
  int64_t chunked_max_rows = 128;                         // AERIE_GEMV_CHUNKED_MAX_ROWS (0: none)
  int64_t chunked_max_weight_bytes = int64_t{4} << 20;  // AERIE_GEMV_CHUNKED_MAX_MIB
};

// The rules as the environment's knobs set them (read once), for measuring on the GPU machine.
const GemvRules& gemv_rules();

// The GEMV for m input rows (1-16) of weights [n, k], 16-bit or fp8 (`fp8_weights`; one fp8 row
// is launch_fp8_one_row's to place). The tensor-core GEMV takes K in whole steps: multiples of
// 32 (16-bit) or 64 (fp8); 9-16 rows always go there (gemv_eligible checked K).
GemvKernel small_gemv_kernel(int64_t m, int64_t n, int64_t k, bool fp8_weights, const GemvRules& rules);

// Whether a product of m > 16 rows of weights [n, k] (16-bit) takes the tensor-core GEMV in
// chunks of 16 rows (the rule above) rather than cuBLASLt.
bool gemv_takes_row_chunks(int64_t m, int64_t n, int64_t k, const GemvRules& rules);

// The GEMV for every row count under --enable-deterministic-inference (kernels/batch_invariant.hpp):
// chosen by K alone, so a row is summed the same way in a one-row step, a verify, a prompt chunk
// and any mix of them: the tensor-core GEMV wherever K comes in whole steps, else the CUDA-core
// one; more rows than a launch takes run as chunks of it. (The one-row rule by shape — SmolLM2's
// o_proj and down_proj on CUDA cores — measured 5% faster at batch 1 and 15% slower for its
// 40-row verify at batch 8 on an H100: docs/deterministic-inference.md.)
GemvKernel batch_invariant_gemv_kernel(int64_t k, bool fp8_weights, const GemvRules& rules);
// Input rows one launch (or one chunk of the tensor-core GEMV's grid) of that kernel takes.
int64_t batch_invariant_gemv_chunk_rows(GemvKernel kernel, bool fp8_weights);

}  // namespace aerie::kernels
