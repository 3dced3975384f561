#pragma once
// Block-wide helpers of the sampling kernels (ops_sampling.cu, ops_tree_accept.cu): the
// row argmax, the filter (softmax with temperature, then top-k / top-p / min-p as one
// probability threshold) and the draw in id order, so sampling and speculative acceptance
// filter and draw alike.
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

// The maximum of one row and its lowest index, by the whole block: 16-byte loads, four in flight
// per thread before any is compared, so one block reads a row of tens of thousands of logits in a
// few memory round trips (a greedy row then needs no stage of many blocks before it). Ties go to
// the lowest index (better()); a row not 16-byte aligned or not a multiple of 4 is read one by one.
__device__ inline ArgMax row_argmax(const float* row, int64_t vocab) {
  ArgMax best{-INFINITY, -1};
  if ((vocab & 3) == 0 && (reinterpret_cast<uintptr_t>(row) & 15) == 0) {
    constexpr int kInFlight = 4;
    const float4* r4 = reinterpret_cast<const float4*>(row);
    const int64_t n4 = vocab >> 2, stride = blockDim.x;
    for (int64_t base = threadIdx.x; base < n4; base += stride * kInFlight) {
      float4 x[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int64_t i = base + u * stride;
        if (i < n4) x[u] = load_from_previous_kernel(r4 + i);
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int64_t i = base + u * stride;
        if (i >= n4) break;
        const int32_t v = static_cast<int32_t>(4 * i);
        best = better(best, ArgMax{x[u].x, v});
        best = better(best, ArgMax{x[u].y, v + 1});
        best = better(best, ArgMax{x[u].z, v + 2});
        best = better(best, ArgMax{x[u].w, v + 3});
      }
    }
  } else {
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) best = better(best, ArgMax{row[v], static_cast<int32_t>(v)});
  }
  return best;
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

// softmax(row / temperature) of a row whose maximum is mx: p(v) = expf((row[v] - mx) * inv_t)
// * inv_z, kept when p(v) >= tau. tau is the largest of min_p * p_max and the top-k and top-p
// thresholds (k <= 0 or k >= vocab, top_p >= 1: no limit), at most p_max, so the most likely
// token always survives.
struct RowFilter {
  float inv_z, tau;
};
__device__ inline RowFilter row_filter(const float* row, int64_t vocab, float mx, float inv_t, int32_t k, float top_p, float min_p,
                                       float* scratch) {
  float z = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) z += __expf((row[v] - mx) * inv_t);
  z = block_sum(z, scratch);
  const float inv_z = 1.0f / z, p_max = inv_z;
  float tau = min_p * p_max;
  if (k > 0 && k < vocab) {
    const float fk = static_cast<float>(k);
    tau = fmaxf(tau, threshold_search(row, vocab, mx, inv_z, inv_t, p_max, [=](float count, float) { return count >= fk; }, scratch));
  }
  if (top_p < 1.0f) {
    tau = fmaxf(tau, threshold_search(row, vocab, mx, inv_z, inv_t, p_max, [=](float, float mass) { return mass >= top_p; }, scratch));
  }
  return {inv_z, fminf(tau, p_max)};
}

// Draws one token in id order among the eligible ones: thread i sums the probabilities
// prob(v) of the eligible ids of a contiguous chunk, a serial scan of the chunk sums (
// deterministic, cheap next to the row passes) makes them a prefix over ids, and the thread
// whose range holds target(total) walks its chunk to the token. Returns, on every thread, the
// token, or the last eligible id when rounding puts the target past the end (-1: none is
// eligible). chunk_sums: [blockDim.x] shared floats; scratch, am_scratch: 32 shared entries;
// chosen: one shared int.
template <class Prob, class Eligible, class Target>
__device__ int32_t draw_in_id_order(int64_t vocab, Prob prob, Eligible eligible, Target target, float* chunk_sums, float* scratch,
                                    ArgMax* am_scratch, int32_t* chosen) {
  const int64_t per = (vocab + blockDim.x - 1) / blockDim.x;
  const int64_t begin = threadIdx.x * per, end = min64(vocab, begin + per);
  float local = 0.0f;
  int32_t last_kept = -1;
  for (int64_t v = begin; v < end; ++v) {
    const float p = prob(v);
    if (eligible(v, p)) {
      local += p;
      last_kept = static_cast<int32_t>(v);
    }
  }
  chunk_sums[threadIdx.x] = local;
  __syncthreads();
  if (threadIdx.x == 0) {
    float run = 0.0f;
    for (int i = 0; i < static_cast<int>(blockDim.x); ++i) {
      const float c = chunk_sums[i];
      chunk_sums[i] = run;
      run += c;
    }
    scratch[0] = run;
    *chosen = -1;
  }
  __syncthreads();
  const float u = target(scratch[0]);
  ArgMax last{static_cast<float>(last_kept), last_kept};
  last = block_argmax(last, am_scratch);
  float run = chunk_sums[threadIdx.x];
  if (u >= run && u < run + local) {  // at most one thread's range holds u
    for (int64_t v = begin; v < end; ++v) {
      const float p = prob(v);
      if (!eligible(v, p)) continue;
      run += p;
      if (u < run) {
        *chosen = static_cast<int32_t>(v);
        break;
      }
    }
  }
  __syncthreads();
  return *chosen >= 0 ? *chosen : last.i;
}

}  // namespace aerie::kernels::cuda
