#pragma once
#include "kernels/batch_invariant.hpp"
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"
#include "kernels/weight_blocks.hpp"

namespace aerie::kernels {

/// y = x w^T (+ bias): the nn.Linear convention, fp32 accumulation.
///
/// An FP8 copy of the weight (w_fp8, f8e4m3 [n, k], with one f32 scale per row, w_scale [n];
/// model/fp8_weights.hpp) serves products of up to kFp8MaxRows rows of x, where the weight's
/// bytes are the cost: then y[i, j] = w_scale[j] * sum_c x[i, c] w_fp8[j, c] (+ bias[j]), the
/// sum over the exact fp8 values in fp32. Larger products read w, where fp8 would save nothing
/// without fp8 GEMMs. Both backends follow this rule. The CUDA backend reads the fp8 bytes in
/// its GEMVs for bf16 x (other dtypes: tiles dequantized for cuBLAS); the CPU its reference loop.
inline constexpr int64_t kFp8MaxRows = 16;
/// The rule itself, for every backend and every op taking an fp8 copy: a product of `rows` rows
/// of x reads w_fp8 when it is given and rows <= kFp8MaxRows, at every row count when products
/// are batch-invariant (kernels/batch_invariant.hpp: a row must not read other weights in a
/// larger batch).
inline bool fp8_copy_serves(const TensorView& w_fp8, int64_t rows) {
  return w_fp8.defined() && (rows <= kFp8MaxRows || batch_invariant());
}
struct MatmulParams {
  TensorView x;          // [m, k]
  TensorView w;          // [n, k]
  TensorView bias = {};  // [n], optional
  TensorView w_fp8 = {};    // [n, k] f8e4m3, optional: w quantized, for up to kFp8MaxRows rows
  TensorView w_scale = {};  // [n] f32, with (and only with) w_fp8
  WeightBlocks w_blocks = {};  // optional GGUF blocks of w (CPU; kernels/weight_blocks.hpp), for up to kBlocksMaxRows rows
  TensorView y;          // [m, n], out
  void validate() const;
};
Status matmul(const MatmulParams& p, const Stream& stream);

/// The first half of a Llama MLP: out = silu(x w_gate^T) * (x w_up^T), with the gate and up
/// projections merged row-interleaved in w (row 2i = gate_i, row 2i+1 = up_i; see
/// silu_mul.hpp). The CUDA backend fuses the activation into the small-batch GEMV, whose
/// blocks own row pairs; otherwise (and on CPU) matmul writes gate_up, silu_mul reads it.
struct GateUpSiluParams {
  TensorView x;          // [m, k]
  TensorView w;          // [2 * inter, k], rows interleaved gate/up
  TensorView bias = {};  // [2 * inter], optional, interleaved the same way
  TensorView w_fp8 = {}, w_scale = {};  // optional fp8 copy of w with row scales (as MatmulParams)
  WeightBlocks w_blocks = {};           // optional GGUF blocks of w (as MatmulParams)
  TensorView gate_up;    // [m, 2 * inter] scratch (the pre-activation, when not fused)
  TensorView out;        // [m, inter]
  void validate() const;
};
Status gate_up_silu(const GateUpSiluParams& p, const Stream& stream);

/// Tuning knob of the CUDA backend: products with at most this many rows of x (<= 16; 9-16
/// when K is a multiple of 32) use Aerie's GEMVs instead of cuBLAS (bf16/f16). 0 sends
/// everything to cuBLAS.
void set_gemv_max_rows(int rows);
int gemv_max_rows();
/// For measuring (aerie-bench kernels): products of 17 to `rows` rows take the tensor-core GEMV in
/// chunks of 16, whatever the weight's size (0: none, cuBLASLt); -1: the rules again
/// (kernels/gemv_rules.hpp, chunked_max_rows / chunked_max_weight_bytes). CUDA only.
void set_gemv_chunked_rows(int64_t rows);

/// CPU backend: f32 products go to the small-batch kernel (1-16 rows) and oneDNN's sgemm
/// (more rows, when the build has it: AERIE_WITH_ONEDNN); `true` sends them to the blocked
/// reference loop instead (tests compare the paths).
void set_cpu_gemm_reference(bool on);
/// Whether f32 products on the CPU go to BLAS now.
bool cpu_gemm_uses_blas();
/// What computes f32 products on the CPU now, for logs: "oneDNN sgemm" or "reference loop".
const char* cpu_gemm_name();

}  // namespace aerie::kernels
