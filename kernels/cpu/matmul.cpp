#include <algorithm>
#include <atomic>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/cpu/blas_gemm.hpp"
#include "kernels/cpu/parallel_for.hpp"
#include "kernels/cpu/int8_block_gemm.hpp"
#include "kernels/cpu/small_batch_gemm.hpp"

namespace aerie::kernels {

namespace {
std::atomic<bool> reference_gemm{false};
}  // namespace

void set_cpu_gemm_reference(bool on) { reference_gemm.store(on); }
bool cpu_gemm_uses_blas() { return !reference_gemm.load() && cpu::blas_available(); }
const char* cpu_gemm_name() {
  if (reference_gemm.load()) return "reference loop";
  const auto isa = cpu::small_batch_gemm_isa();
  const bool blas = cpu::blas_available();
  if (isa == cpu::SmallBatchIsa::kAvx512) return blas ? "AVX-512 small-batch kernel (<= 16 rows), oneDNN sgemm" : "AVX-512 small-batch kernel (<= 16 rows), reference loop";
  if (isa == cpu::SmallBatchIsa::kAvx2) return blas ? "AVX2 small-batch kernel (<= 16 rows), oneDNN sgemm" : "AVX2 small-batch kernel (<= 16 rows), reference loop";
  return blas ? "oneDNN sgemm" : "reference loop";
}

namespace cpu {

namespace {

// The reference: blocked for the caches (a block of weight rows, converted to f32 once,
// meets every activation row in small tiles), eight partial sums per dot product. Each
// output's sum is formed in the same order whatever m is. With row scales (an f8e4m3 weight) the
// sum is over the exact fp8 values, times the row's scale (kernels/matmul.hpp).
void reference_matmul(const MatmulParams& p, const TensorView& wv, const float* scale, const float* x, float* y) {
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = wv.dim(0);
  constexpr int64_t kRowsPerBlock = 32, kTile = 16;
  const int64_t blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  parallel_for(blocks, m * k * kRowsPerBlock, [&](int64_t blk) {
    const int64_t j0 = blk * kRowsPerBlock, j1 = std::min(n, j0 + kRowsPerBlock);
    thread_local std::vector<float> w;
    w.resize(static_cast<size_t>((j1 - j0) * k));
    convert_to_float(static_cast<const char*>(wv.data) + j0 * k * static_cast<int64_t>(dtype_size(wv.dtype)), wv.dtype, (j1 - j0) * k,
                     w.data());
    for (int64_t i0 = 0; i0 < m; i0 += kTile) {
      const int64_t i1 = std::min(m, i0 + kTile);
      for (int64_t j = j0; j < j1; ++j) {
        const float* wj = w.data() + (j - j0) * k;
        for (int64_t i = i0; i < i1; ++i) {
          const float* xi = x + i * k;
          float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t c = 0;
          for (; c + 8 <= k; c += 8)
            for (int u = 0; u < 8; ++u) acc[u] += xi[c + u] * wj[c + u];
          float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
          for (; c < k; ++c) sum += xi[c] * wj[c];
          y[i * n + j] = scale ? sum * scale[j] : sum;
        }
      }
    }
  });
}

// y = x w^T through oneDNN for a 16-bit weight: blocks of rows widened to f32 (about 1 MB
// each, so a block stays in cache for the product that reads it).
Status widened_blas_matmul(const TensorView& wv, int64_t m, int64_t n, int64_t k, const float* x, float* y) {
  const int64_t block = std::max<int64_t>(16, (int64_t{1} << 18) / std::max<int64_t>(k, 1));
  thread_local std::vector<float> w;
  w.resize(static_cast<size_t>(std::min(block, n) * k));
  const size_t es = dtype_size(wv.dtype);
  for (int64_t j0 = 0; j0 < n; j0 += block) {
    const int64_t rows = std::min(block, n - j0);
    convert_to_float(static_cast<const char*>(wv.data) + j0 * k * static_cast<int64_t>(es), wv.dtype, rows * k, w.data());
    if (Status st = blas_sgemm(true, m, rows, k, x, k, w.data(), k, y + j0, n); !st.is_ok()) return st;
  }
  return Status::ok();
}

}  // namespace

Status matmul(const MatmulParams& p) {
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  // f32 operands are used in place; other dtypes go through f32 copies.
  std::vector<float> x_copy, y_copy;
  const float* x = p.x.ptr<float>();
  if (p.x.dtype != DType::kF32) {
    x_copy.resize(static_cast<size_t>(m * k));
    convert_to_float(p.x.data, p.x.dtype, m * k, x_copy.data());
    x = x_copy.data();
  }
  float* y = p.y.ptr<float>();
  if (p.y.dtype != DType::kF32) {
    y_copy.resize(static_cast<size_t>(m * n));
    y = y_copy.data();
  }
  // A few rows (decode, verify) stream the weights once through the small-batch kernel: the
  // weight's GGUF blocks when it has them (4.5-8.5 bits a weight, the same bits as its f32
  // copy), else f32 or bf16 weights (bf16 widened in registers: the draft heads ship in bf16,
  // and keeping them so halves what a draft step reads); more rows (prefill) go to oneDNN, a
  // bf16/f16 weight widened a block of rows at a time.
  const bool fp8 = fp8_copy_serves(p.w_fp8, m);
  const bool fast = !fp8 && !reference_gemm.load();
  // Batch-invariant products (kernels/batch_invariant.hpp) take the small-batch kernel at every
  // row count, 16 rows at a time: it sums a row the same way for any m.
  const bool small = (m <= kSmallBatchMaxRows || batch_invariant()) && small_batch_gemm_available();
  auto in_chunks = [&](const auto& w) {
    for (int64_t r0 = 0; r0 < m; r0 += kSmallBatchMaxRows)
      small_batch_gemm(std::min(kSmallBatchMaxRows, m - r0), n, k, x + r0 * k, w, y + r0 * n);
  };
  if (fp8) {
    reference_matmul(p, p.w_fp8, p.w_scale.ptr<float>(), x, y);
  } else if (fast && p.w_blocks.defined() && p.w_blocks.layout == BlockLayout::kTiles16) {
    // Blocks in tile order: int8 activations for every row count, prefill included (a row's
    // numbers must not depend on how many rows share its product).
    int8_block_gemm(m, n, k, x, p.w_blocks, y);
  } else if (fast && small && blocks_copy_serves(p.w_blocks, m)) {
    in_chunks(p.w_blocks);
  } else if (fast && small && p.w.dtype == DType::kF32) {
    in_chunks(p.w.ptr<float>());
  } else if (fast && small && p.w.dtype == DType::kBF16) {
    in_chunks(static_cast<const uint16_t*>(p.w.data));
  } else if (fast && blas_available() && p.w.dtype == DType::kF32) {
    if (Status st = blas_sgemm_nt(m, n, k, x, p.w.ptr<float>(), y); !st.is_ok()) return st;
  } else if (fast && blas_available() && (p.w.dtype == DType::kBF16 || p.w.dtype == DType::kF16)) {
    if (Status st = widened_blas_matmul(p.w, m, n, k, x, y); !st.is_ok()) return st;
  } else {
    reference_matmul(p, p.w, nullptr, x, y);
  }
  if (p.bias.defined())
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] += load_as_float(p.bias.data, p.bias.dtype, j);
  if (p.y.dtype != DType::kF32)
    for (int64_t i = 0; i < m * n; ++i) store_from_float(p.y.data, p.y.dtype, i, y[i]);
  return Status::ok();
}

}  // namespace cpu
}  // namespace aerie::kernels
