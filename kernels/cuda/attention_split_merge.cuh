#pragma once
// Flash-decoding's merge of a query row's KV splits inside the attention kernel: the block that
// finishes its (query block, KV head) last merges every split's partial rows, instead of a
// second kernel doing it. At batch 1 a decode step's attention is a chain of memory round trips
// (slots, one K/V tile, the partial rows) and the separate merge kernel was half of it
// (docs/performance.md, "Decode at batch 1"); the merge itself is a few kilobytes of L2 reads.
//
// The arithmetic is the merge kernel's (ops_attention.cu, combine_splits_kernel) in the same
// order, so both give the same bits. CUDA-only header.
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

// Every thread of the block calls this after writing its share of the block's partial rows.
// Counts the block in at `counter` (one per query block and KV head, zero before the launch)
// and says whether it was the last of the `num_splits` blocks; the last one sets the counter
// back to zero, so the next launch (a graph replay too) starts from zero again.
__device__ __forceinline__ bool last_split_arrives(unsigned* counter, int num_splits) {
  __shared__ bool last;
  __threadfence();  // this thread's partial rows are visible device-wide before the block counts
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned before = atomicAdd(counter, 1u);
    last = before == static_cast<unsigned>(num_splits - 1);
    if (last) atomicExch(counter, 0u);  // every split has counted: nothing else touches it this launch
  }
  __syncthreads();
  if (last) __threadfence();  // the other blocks' rows are read after their count was seen
  return last;
}

// Merges the splits of the block's `rows` query rows: row r's partials lie at
// partial + row_of(r) * num_splits * (D + 2) ([split][dim + 2]: unnormalised output, max, sum)
// and its output at out + row_of(r) * D. `scratch` is shared memory of
// merge_split_scratch_floats(rows, num_splits) floats that no thread still reads. Loads go to
// L2 (__ldcg): the rows were written by other blocks during this launch.
__host__ __device__ constexpr int merge_split_scratch_floats(int rows, int num_splits) { return rows * (2 * num_splits + 1); }

template <class TQ, class RowOf>
__device__ void merge_split_rows(const float* partial, TQ* out, int rows, int D, int num_splits, float* scratch, RowOf row_of) {
  float* weight = scratch;                           // [rows][splits]: the split's max, then its weight
  float* sums = scratch + rows * num_splits;         // [rows][splits]: the split's sum
  float* inv_den = sums + rows * num_splits;         // [rows]
  const int stride = D + 2;
  for (int i = threadIdx.x; i < rows * num_splits; i += blockDim.x) {
    const int r = i / num_splits, s = i % num_splits;
    const float* part = partial + (static_cast<int64_t>(row_of(r)) * num_splits + s) * stride;
    const float l = __ldcg(part + D + 1);
    weight[i] = l > 0.0f ? __ldcg(part + D) : -INFINITY;
    sums[i] = l;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    float* w = weight + r * num_splits;
    const float* l = sums + r * num_splits;
    float mx = -INFINITY;
    for (int s = 0; s < num_splits; ++s) mx = fmaxf(mx, w[s]);
    float den = 0.0f;
    for (int s = 0; s < num_splits; ++s) {
      w[s] = (l[s] > 0.0f && mx != -INFINITY) ? __expf(w[s] - mx) : 0.0f;
      den += w[s] * l[s];
    }
    inv_den[r] = den > 0.0f ? 1.0f / den : 0.0f;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows * D; i += blockDim.x) {
    const int r = i / D, d = i % D;
    const int64_t row = row_of(r);
    const float* base = partial + row * num_splits * stride + d;
    const float* w = weight + r * num_splits;
    float num = 0.0f;
#pragma unroll 8
    for (int s = 0; s < num_splits; ++s) num += __ldcg(base + s * stride) * w[s];
    out[row * D + d] = from_float<TQ>(num * inv_den[r]);
  }
}

}  // namespace aerie::kernels::cuda
