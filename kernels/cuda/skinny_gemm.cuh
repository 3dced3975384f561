#pragma once
// Products of 17-64 input rows on the tensor cores (ops_matmul_skinny.cu): decode batches of
// 17-64 requests and verify batches of several tokens each, where a product still reads its
// weights about once and cuBLAS's tiles, built for square products, reach 33-65% of the HBM
// bandwidth on the H200 (docs/performance.md). CUDA-only header.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/gemv_args.cuh"

namespace aerie::kernels::cuda {

constexpr int kSkinnyMinRows = 17, kSkinnyMaxRows = 64;

// Whether the kernel takes K: whole 64-wide steps (each of a weight row's 4 threads loads 2 x 16 bytes).
bool skinny_gemm_takes(int64_t k);

// y = x w^T through the epilogue, for a.rows in [kSkinnyMinRows, kSkinnyMaxRows]; T is bf16 or
// f16, the weights in T, 16-byte aligned x and w.
template <class T, class TO, Epilogue EPI>
void launch_skinny_gemm(const GemvArgs<T, TO, T>& a, cudaStream_t stream);

}  // namespace aerie::kernels::cuda
