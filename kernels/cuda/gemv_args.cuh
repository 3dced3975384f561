#pragma once
// What the GEMVs (ops_matmul.cu: 1-16 input rows) read and write, and their epilogues: stored,
// SiLU-paired (the MLP's gate/up with its activation) or RoPE + KV write (the merged q/k/v
// projection). CUDA-only header.
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

// What one GEMV launch reads and writes. The ROPE epilogue (the merged q/k/v projection)
// also needs the token positions and cache slots and writes q_out and the KV cache
// instead of y.
template <class T, class TO, class W = T>
struct GemvArgs {
  const T* x;
  const W* w;
  const T* bias;
  TO* y;
  int64_t n, k;
  // ROPE only:
  const int32_t* positions;
  const float* inv_freq;
  const int32_t* slots;
  T* q_out;
  T* k_cache;
  T* v_cache;
  int64_t q_heads, kv_heads, head_dim, num_slots;
  float rope_scaling;
  const float* w_scale = nullptr;  // fp8 weights: one scale per output row
  int64_t rows = 0;                // rows of x (set by launch_gemv; a kernel for M rows serves up to M)
  // The tensor-core GEMV's 16-row bucket and the CUDA-core GEMV at 8 rows only: input rows in
  // chunks of 16 (8), each chunk its own blocks (batch-invariant products of any row count:
  // kernels/batch_invariant.hpp).
  int64_t row_chunks = 1;
};

enum class Epilogue { kStore, kSiluPairs, kRope };

// The same product over input rows [m0, rows) only: what each row reads and writes moves with it.
template <Epilogue EPI, class T, class TO, class W>
__host__ __device__ __forceinline__ GemvArgs<T, TO, W> from_input_row(GemvArgs<T, TO, W> a, int64_t m0) {
  a.x += m0 * a.k;
  if constexpr (EPI == Epilogue::kStore) {
    a.y += m0 * a.n;
  } else if constexpr (EPI == Epilogue::kSiluPairs) {
    a.y += m0 * (a.n / 2);
  } else {
    a.positions += m0;
    a.slots += m0;
    a.q_out += m0 * a.q_heads * a.head_dim;
  }
  a.rows -= m0;
  return a;
}

// Input rows in chunks of C (GemvArgs::row_chunks) for a GEMV kernel whose bucket M is C: the
// tensor-core GEMV at 16 rows, the CUDA-core one at 8 (batch-invariant products of any row count;
// for any other M one chunk). A launch's grid is (weight tiles) x (chunks), a tile's chunks side
// by side so that they find its weights in L2; each chunk is summed as C rows are.
template <int M, int C, class T, class TO, class W>
__host__ __device__ __forceinline__ int64_t gemv_row_chunks(const GemvArgs<T, TO, W>& a) {
  return M == C ? a.row_chunks : 1;
}
template <int M, int C, class T, class TO, class W>
__host__ __forceinline__ unsigned gemv_grid(const GemvArgs<T, TO, W>& a, int64_t weight_tiles) {
  return static_cast<unsigned>(weight_tiles * gemv_row_chunks<M, C>(a));
}
// This block's chunk of input rows, and its weight tile's index.
template <class T, class TO, class W>
struct GemvBlock {
  GemvArgs<T, TO, W> a;
  int64_t tile;
};
template <int M, int C, Epilogue EPI, class T, class TO, class W>
__device__ __forceinline__ GemvBlock<T, TO, W> gemv_block(const GemvArgs<T, TO, W>& args) {
  const int64_t chunks = gemv_row_chunks<M, C>(args), chunk = blockIdx.x % chunks;
  return {chunk > 0 ? from_input_row<EPI>(args, chunk * C) : args, static_cast<int64_t>(blockIdx.x / chunks)};
}

// kSiluPairs: rows come in interleaved (gate, up) pairs and the block writes
// silu(gate) * up for each pair instead of the two products (each rounded to T first, as
// matmul + silu_mul would store them): the MLP's gate/up projection with its activation.
// kRope: rows are the merged q/k/v projection with each q/k rotation pair adjacent
// (kernels/rope_kv_write.hpp); the block rotates its pair and writes q_out or the K cache,
// or copies its two V dims into the V cache: the projection with rope_kv_write fused.
// One pair of output rows (first, first + 1) of input row m, whose sums (bias included) are
// s0 and s1, through a pair epilogue.
template <class T, class TO, class W, Epilogue EPI>
__device__ __forceinline__ void gemv_write_pair(const GemvArgs<T, TO, W>& a, int64_t first, int m, float s0, float s1) {
  // Round as the unfused path stores the projection (in T).
  const float v0 = to_float(from_float<T>(s0)), v1 = to_float(from_float<T>(s1));
  if constexpr (EPI == Epilogue::kSiluPairs) {
    a.y[m * (a.n / 2) + first / 2] = from_float<TO>(v0 / (1.0f + __expf(-v0)) * v1);
  } else {
    static_assert(EPI == Epilogue::kRope, "a pair epilogue");
    const int64_t D = a.head_dim, half = D / 2, head = first / D, within = first % D;
    const int32_t slot = a.slots[m];
    const bool slot_ok = slot >= 0 && slot < a.num_slots;
    if (head < a.q_heads + a.kv_heads) {
      const int64_t i = within / 2;  // the pair (dim i, dim i + half)
      float sn, cs;
      sincosf(static_cast<float>(a.positions[m]) * a.inv_freq[i], &sn, &cs);
      cs *= a.rope_scaling;
      sn *= a.rope_scaling;
      const T o1 = from_float<T>(v0 * cs - v1 * sn), o2 = from_float<T>(v1 * cs + v0 * sn);
      if (head < a.q_heads) {
        T* q = a.q_out + (m * a.q_heads + head) * D;
        q[i] = o1;
        q[i + half] = o2;
      } else if (slot_ok) {
        T* kd = a.k_cache + (static_cast<int64_t>(slot) * a.kv_heads + (head - a.q_heads)) * D;
        kd[i] = o1;
        kd[i + half] = o2;
      }
    } else if (slot_ok) {
      T* vd = a.v_cache + (static_cast<int64_t>(slot) * a.kv_heads + (head - a.q_heads - a.kv_heads)) * D;
      vd[within] = from_float<T>(v0);
      vd[within + 1] = from_float<T>(v1);
    }
  }
}

// The end of a GEMV block: R output rows x M input rows whose sums row_sum(r, m) gives,
// stored (kStore) or through the pair epilogues.
template <class T, class TO, int M, int R, int THREADS, Epilogue EPI, class W, class RowSum>
__device__ __forceinline__ void gemv_epilogue(const GemvArgs<T, TO, W>& a, int64_t row0, RowSum row_sum) {
  const int64_t n = a.n;
  if constexpr (EPI == Epilogue::kSiluPairs || EPI == Epilogue::kRope) {
    static_assert(R % 2 == 0, "pair epilogues need an even number of rows per block");
    for (int idx = threadIdx.x; idx < (R / 2) * M; idx += THREADS) {
      const int j = idx / M, m = idx % M;
      const int64_t first = row0 + 2 * j;
      if (first >= n || m >= a.rows) continue;
      gemv_write_pair<T, TO, W, EPI>(a, first, m, row_sum(2 * j, m), row_sum(2 * j + 1, m));
    }
  } else {
    // An else branch, not an early return: nvcc warns of an unreachable loop otherwise.
    for (int idx = threadIdx.x; idx < R * M; idx += THREADS) {
      const int r = idx / M, m = idx % M;
      if (row0 + r >= n || m >= a.rows) continue;
      a.y[m * n + row0 + r] = from_float<TO>(row_sum(r, m));
    }
  }
}

}  // namespace aerie::kernels::cuda
