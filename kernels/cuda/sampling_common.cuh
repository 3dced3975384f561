#pragma once
// Block-wide helpers of the sampling kernels (ops_sampling.cu, ops_tree_accept.cu): the
// row argmax and the probability thresholds of top-k and top-p.
#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

struct ArgMax {
  float v;
  int32_t i;
};
__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  // Larger value wins; equal values: the lower index (torch.argmax, the CPU reference).
  if (b.v > a.v || (b.v == a.v && b.i < a.i) || (a.i < 0 && b.i >= 0)) return b;
  return a;
}
__device__ inline ArgMax block_argmax(ArgMax x, ArgMax* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax y{__shfl_xor_sync(0xffffffffu, x.v, o), __shfl_xor_sync(0xffffffffu, x.i, o)};
    x = better(x, y);
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : ArgMax{-INFINITY, -1};
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax y{__shfl_xor_sync(0xffffffffu, x.v, o), __shfl_xor_sync(0xffffffffu, x.i, o)};
    x = better(x, y);
  }
  return x;
}

// The smallest probability value v among tokens such that pred(v) holds for the set
// {p >= v}, found by bisection over values then snapped to an actual probability.
template <class Pred>
__device__ inline float threshold_search(const float* row, int64_t vocab, float mx, float inv_z, float inv_t, float p_max, Pred pred,
                                  float* scratch) {
  float lo = 0.0f, hi = p_max;  // pred(lo) holds; pred(p_max + eps) need not
  for (int it = 0; it < 40; ++it) {
    const float mid = 0.5f * (lo + hi);
    float count = 0.0f, mass = 0.0f;
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float p = __expf((row[v] - mx) * inv_t) * inv_z;
      if (p >= mid) {
        count += 1.0f;
        mass += p;
      }
    }
    count = block_sum(count, scratch);
    mass = block_sum(mass, scratch);
    if (pred(count, mass)) lo = mid;
    else hi = mid;
  }
  // Snap to the smallest probability >= lo (it is a real token's probability).
  float snap = INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float p = __expf((row[v] - mx) * inv_t) * inv_z;
    if (p >= lo) snap = fminf(snap, p);
  }
  return -block_max(-snap, scratch);
}

}  // namespace aerie::kernels::cuda
