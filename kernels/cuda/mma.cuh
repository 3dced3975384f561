#pragma once
// Warp-level tensor-core primitives (sm_80+): mma.sync m16n8k16 with fp32 accumulators and
// ldmatrix from shared memory, in the fragment layouts of the PTX ISA. CUDA-only header.
//
// For a lane l, g = l / 4 and c = 2 * (l % 4):
//  - A (16 x 16, row-major), four 32-bit registers of two elements each:
//    a[0] = A[g][c..c+1], a[1] = A[g+8][c..c+1], a[2] = A[g][c+8..c+9], a[3] = A[g+8][c+8..c+9]
//  - B (16 x 8, "col": stored as B^T rows), two registers: b[0] = B[c..c+1][g], b[1] = B[c+8..c+9][g]
//  - C / D (16 x 8, fp32): d[0..1] = D[g][c..c+1], d[2..3] = D[g+8][c..c+1]
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace aerie::kernels::cuda {

// d += a * b for bf16 or f16 inputs (T), fp32 accumulators: A's four registers, B's two.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                             uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __half>, "mma_m16n8k16: bf16 or f16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_m16n8k16<T>(d, a[0], a[1], a[2], a[3], b0, b1);
}

// Four 8 x 8 matrices of 16-bit elements from shared memory: lanes 8i .. 8i + 7 give the
// addresses of matrix i's eight rows (16 bytes each); r[i] is matrix i's element pair of this
// lane (row l / 4, columns 2 (l % 4) .. + 1), or with `trans` its transpose's.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* row_address) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

// Two floats as one register of two 16-bit elements (lo in the low half: the lower column).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    r = *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    r = *reinterpret_cast<const uint32_t*>(&v);
  }
  return r;
}

}  // namespace aerie::kernels::cuda
