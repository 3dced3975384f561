// Products of 17-64 input rows on the tensor cores, split over K across the blocks of a
// thread-block cluster (Hopper) whose partial sums meet in distributed shared memory.
//
// At these sizes a product is still a weight stream: the 8B shape's q/k/v at 32 rows reads
// 50 MB of weights and 0.26 MB of input. cuBLAS(Lt)'s tiles, made for square products, took
// 20-40 us for products the one-row GEMV streams in 15-36 us (q/k/v and o_proj at 35-50% of
// copy bandwidth). The tensor-core GEMV (ops_matmul.cu) that serves up to 16 rows keeps its
// input rows in registers, re-read from L2 by every block of 16 weight rows: at 32 rows that is
// twice the weight traffic again and 255 registers. Here:
//  - a block of NW warps owns 16 x NW weight rows (each warp 16, as the GEMV's); each warp
//    streams its rows through its own ring of shared memory with cp.async, kStages - 1 steps of
//    64 k ahead of the one it multiplies (no block barrier in the loop), the ring filled before
//    waiting on the previous kernel (PDL);
//  - the input rows come from global memory per step; the block's warps read the same range, so
//    L1 serves all but the first;
//  - K is split across the S blocks of a cluster so that the grid fills one wave of resident
//    blocks; each block leaves its partial sums in shared memory, and block r of the cluster adds
//    rows r / S of everyone's (distributed shared memory) and runs the epilogue on them: no
//    workspace, no second launch, the same under CUDA-graph capture.
// The MMA fragments are the tensor-core GEMV's (a step of 64 k, thread t of a row group holding
// k = 16t .. 16t + 15 of its two weight rows and of the input row it serves as B's column).
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/skinny_gemm.cuh"
#include "kernels/device_runtime.hpp"
#include "kernels/env_knob.hpp"

namespace aerie::kernels::cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kStepK = 64;          // k per step: a warp's 16 weight rows x 64 k = 2 KB
constexpr int kStages = 8;          // steps of a warp's weight ring in flight (7 ahead of the one computed)
constexpr int kStageElems = 16 * kStepK;
constexpr int kMaxSplits = 8;       // portable cluster size

template <class T, int M, int NW>
constexpr size_t skinny_smem_bytes() {
  const size_t ring = static_cast<size_t>(NW) * kStages * kStageElems * sizeof(T), partials = 16u * NW * (M + 1) * sizeof(float);
  return ring > partials ? ring : partials;
}

// M: the row bucket (32 or 64; a.rows of them are real). NW: warps per block (4 or 8).
template <class T, class TO, int M, int NW, Epilogue EPI>
__global__ void __launch_bounds__(NW * 32) skinny_gemm_kernel(const GemvArgs<T, TO, T> a) {
  constexpr int NT = M / 8, BN = 16 * NW, THREADS = NW * 32;
  extern __shared__ __align__(16) unsigned char smem[];
  float* const part = reinterpret_cast<float*>(smem);  // after the K loop: partial sums [BN][M + 1]
  pdl_trigger();
  cg::cluster_group cluster = cg::this_cluster();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t n = a.n, k = a.k;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * BN, wrow = row0 + 16 * warp;
  const int splits = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int64_t steps = k / kStepK, per = (steps + splits - 1) / splits;
  const int64_t s0 = min64(steps, rank * per), s1 = min64(steps, s0 + per);
  T* const ring = reinterpret_cast<T*>(smem) + static_cast<size_t>(warp) * kStages * kStageElems;

  // The warp's weight ring: step st's 16 rows x 128 bytes into stage (st - s0) % kStages, one
  // cp.async group per step (empty past the range, so that the group count stays the step
  // count). Within a stage, row r's 16-byte unit u sits at u ^ (r & 7): the MMA reads below (units
  // 2t and 2t + 1 of rows g and g + 8) are then conflict-free. Rows past n are zeros.
  auto issue = [&](int64_t st) {
    if (st < s1) {
      T* stage = ring + ((st - s0) % kStages) * kStageElems;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int idx = i * 32 + lane, r = idx >> 3, u = idx & 7;
        const bool valid = wrow + r < n;
        cp_async16(stage + r * kStepK + ((u ^ (r & 7)) * 8), a.w + (valid ? wrow + r : 0) * k + st * kStepK + u * 8, valid);
      }
    }
    cp_async_commit();
  };
  // The weights never depend on the previous kernel: the ring fills before waiting for it.
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) issue(s0 + j);
  pdl_wait();

  // Input rows straight from global memory: the block's warps read the same x range, so all but
  // the first reach L1; input rows past a.rows read as zeros.
  const T* xrow[NT];
  bool ok_x[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    ok_x[nt] = 8 * nt + g < a.rows;
    xrow[nt] = a.x + (ok_x[nt] ? 8 * nt + g : 0) * k + 16 * t;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float c[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
  for (int64_t st = s0; st < s1; ++st) {
    uint4 xv[NT][2];  // issued first: in flight while the step's weights are waited for
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int v = 0; v < 2; ++v) xv[nt][v] = ok_x[nt] ? __ldg(reinterpret_cast<const uint4*>(xrow[nt] + st * kStepK + 8 * v)) : zero;
    cp_async_wait<kStages - 2>();  // this thread's copies of step st are in
    __syncwarp();                  // and every lane's; all are done reading the stage refilled next
    issue(st + kStages - 1);
    const T* stage = ring + ((st - s0) % kStages) * kStageElems;
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      const int unit = ((2 * t + v) ^ g) * 8;  // rows g and g + 8 share the swizzle (r & 7 = g)
      const uint4 wg = *reinterpret_cast<const uint4*>(stage + g * kStepK + unit);
      const uint4 wh = *reinterpret_cast<const uint4*>(stage + (g + 8) * kStepK + unit);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        mma_m16n8k16<T>(c[nt], wg.x, wh.x, wg.y, wh.y, xv[nt][v].x, xv[nt][v].y);
        mma_m16n8k16<T>(c[nt], wg.z, wh.z, wg.w, wh.w, xv[nt][v].z, xv[nt][v].w);
      }
    }
  }

  // c[nt]: c0, c1 hold weight row g, input rows 8 nt + 2t, + 1; c2, c3 weight row g + 8.
  constexpr int kPs = M + 1;  // odd: the epilogue's reads along rows are conflict-free
  cp_async_wait<0>();
  __syncthreads();  // the rings' space holds the partial sums now
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    float* p0 = part + (16 * warp + g) * kPs + 8 * nt + 2 * t;
    float* p1 = p0 + 8 * kPs;
    p0[0] = c[nt][0];
    p0[1] = c[nt][1];
    p1[0] = c[nt][2];
    p1[1] = c[nt][3];
  }
  cluster.sync();  // every block's partial sums are visible to the cluster

  // Block `rank` finishes rows [r_begin, r_begin + rows_per) of the tile: even counts (BN / S with
  // S a power of two up to 8), so the pair epilogues keep their pairs.
  // All of a sum's remote loads are issued before the first is added: one round trip, not S.
  auto sum = [&](int r, int m) {
    float* mine = part + r * kPs + m;
    float v = 0.0f;
    if (splits == 1) {
      v = *mine;
    } else {
      float got[kMaxSplits];
#pragma unroll
      for (int q = 0; q < kMaxSplits; ++q) got[q] = q < splits ? *cluster.map_shared_rank(mine, q) : 0.0f;
#pragma unroll
      for (int q = 0; q < kMaxSplits; ++q) v += got[q];
    }
    return a.bias ? v + to_float(a.bias[row0 + r]) : v;
  };
  const int rows_per = BN / splits, r_begin = rank * rows_per;
  if constexpr (EPI == Epilogue::kSiluPairs || EPI == Epilogue::kRope) {
    const int pairs = rows_per / 2;
    for (int idx = threadIdx.x; idx < pairs * M; idx += THREADS) {
      const int j = r_begin / 2 + idx % pairs, m = idx / pairs;
      const int64_t first = row0 + 2 * j;
      if (first >= n || m >= a.rows) continue;
      gemv_write_pair<T, TO, T, EPI>(a, first, m, sum(2 * j, m), sum(2 * j + 1, m));
    }
  } else {
    // Consecutive threads take consecutive output columns of one input row: coalesced stores.
    for (int idx = threadIdx.x; idx < rows_per * M; idx += THREADS) {
      const int r = r_begin + idx % rows_per, m = idx / rows_per;
      if (row0 + r >= n || m >= a.rows) continue;
      a.y[m * n + row0 + r] = from_float<TO>(sum(r, m));
    }
  }
  cluster.sync();  // no block leaves while another still reads its partial sums
}

// Blocks of the cluster splitting K: the most (powers of two up to 8) that keep the grid within
// one wave of resident blocks (`resident`: per SM times SMs) and every block at least a ring's
// worth of steps. A block's fixed costs (its first loads, the x chunks' first round trip, the cluster's
// reduction) are paid once per wave: on the H200 a second, partial wave cost more than the
// splits gained. AERIE_GEMM_SKINNY_SPLIT (1, 2, 4 or 8) forces a count, for measuring.
int skinny_splits(int64_t row_blocks, int64_t steps, int64_t resident) {
  static const int forced = env_knob("AERIE_GEMM_SKINNY_SPLIT");
  if (forced == 1 || forced == 2 || forced == 4 || forced == 8) return forced;
  int s = 1;
  while (s < kMaxSplits && row_blocks * 2 * s <= resident && steps >= 2 * s * kStages) s *= 2;
  return s;
}

// Warps per block: 4 (64 weight rows; a 64 KB ring, three blocks per SM);
// AERIE_GEMM_SKINNY_WARPS=8 (128 rows, 128 KB, one block per SM) for measuring.
int skinny_warps() {
  static const int forced = env_knob("AERIE_GEMM_SKINNY_WARPS");
  return forced == 8 ? 8 : 4;
}

template <class T, class TO, int M, int NW, Epilogue EPI>
void launch_skinny(const GemvArgs<T, TO, T>& a, cudaStream_t stream) {
  constexpr int BN = 16 * NW;
  constexpr size_t smem = skinny_smem_bytes<T, M, NW>();
  auto kernel = skinny_gemm_kernel<T, TO, M, NW, EPI>;
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  // Blocks of this instantiation resident at once on the device (registers and shared memory).
  static const int64_t resident = [&] {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, NW * 32, smem) != cudaSuccess || per_sm < 1) per_sm = 1;
    return static_cast<int64_t>(per_sm) * cuda_runtime::sm_count();
  }();
  const int64_t row_blocks = (a.n + BN - 1) / BN;
  const int splits = skinny_splits(row_blocks, a.k / kStepK, resident);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(splits));
  cfg.blockDim = dim3(NW * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = 1;
  attr[1].val.clusterDim.y = static_cast<unsigned>(splits);
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  cudaLaunchKernelEx(&cfg, kernel, a);
}

}  // namespace

bool skinny_gemm_takes(int64_t k) { return k > 0 && k % kStepK == 0; }

template <class T, class TO, Epilogue EPI>
void launch_skinny_gemm(const GemvArgs<T, TO, T>& a, cudaStream_t stream) {
  const bool wide = a.rows > 32;
  if (skinny_warps() == 4) {
    if (wide) launch_skinny<T, TO, 64, 4, EPI>(a, stream);
    else launch_skinny<T, TO, 32, 4, EPI>(a, stream);
  } else {
    if (wide) launch_skinny<T, TO, 64, 8, EPI>(a, stream);
    else launch_skinny<T, TO, 32, 8, EPI>(a, stream);
  }
}

#define AERIE_SKINNY_INSTANCES(T)                                                                  \
  template void launch_skinny_gemm<T, T, Epilogue::kStore>(const GemvArgs<T, T, T>&, cudaStream_t);  \
  template void launch_skinny_gemm<T, float, Epilogue::kStore>(const GemvArgs<T, float, T>&, cudaStream_t); \
  template void launch_skinny_gemm<T, T, Epilogue::kSiluPairs>(const GemvArgs<T, T, T>&, cudaStream_t); \
  template void launch_skinny_gemm<T, T, Epilogue::kRope>(const GemvArgs<T, T, T>&, cudaStream_t);
AERIE_SKINNY_INSTANCES(__nv_bfloat16)
AERIE_SKINNY_INSTANCES(__half)
#undef AERIE_SKINNY_INSTANCES

}  // namespace aerie::kernels::cuda
