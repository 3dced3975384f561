#pragma once
// cuBLASLt products with the algorithm chosen by timing (kernels/cuda/ops_matmul_lt.cu), for the
// matmuls Aerie's GEMVs do not take at decode and verify sizes. CUDA-only header.
#include <cuda_runtime.h>

#include "kernels/matmul.hpp"

namespace aerie::kernels::cuda {

// Products of up to this many rows of x go through the tuned cuBLASLt path: decode and verify
// batches, whose few distinct row counts (the graph buckets) are each tuned once. Prompt-sized
// products keep cublasGemmEx (their row counts vary with every prompt).
inline constexpr int64_t kLtMaxRows = 256;

// y = x w^T (no bias) for bf16/f16 x and w, y in x's dtype or f32, rows <= kLtMaxRows. Returns
// false when it does not serve the call (shape, dtype, AERIE_GEMM_LT=0, a shape first seen
// while the stream is being captured, or a cuBLASLt failure): the caller then uses cuBLAS.
// The first call of a shape outside a capture times the heuristic's candidates on the real
// tensors (synchronizing the stream) and keeps the fastest for this thread; graph runners run
// every shape eagerly before they capture it (spec/graph_capture.hpp).
bool matmul_lt(const MatmulParams& p, cudaStream_t stream);

}  // namespace aerie::kernels::cuda
