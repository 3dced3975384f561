// Tuned cuBLASLt products for decode and verify batches (kernels/cuda/matmul_lt.cuh).
//
// cublasGemmEx takes the heuristic's first algorithm. At 17-256 rows of x against an 8B
// layer's weights that choice reads them well below HBM speed (H200, 32 rows: q/k/v at ~42% of
// copy bandwidth, o_proj ~32%: too few tiles for 132 SMs), and other algorithms of the same
// heuristic list (other tiles, split-K) do somewhat better (docs/performance.md). So the first
// call of each shape times the list's candidates on the real tensors and keeps the fastest, as
// sglang and vLLM's tuned GEMM configs do offline. Outside graph warm-ups a row count that is not
// a power of two first borrows the algorithm its bucket (the next power of two) already has, where
// cuBLASLt confirms that it serves the exact shape, and is timed for itself only once it recurs
// (kernels/gemm_tuning.hpp).
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <unordered_map>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/matmul_lt.cuh"
#include "kernels/env_knob.hpp"
#include "kernels/gemm_tuning.hpp"
#include "kernels/log.hpp"

namespace aerie::kernels::cuda {

namespace {

constexpr size_t kLtWorkspaceBytes = 32u << 20;
constexpr int kLtCandidates = 16;  // heuristic results timed per shape
constexpr int kLtTimedRuns = 5;

bool lt_enabled() {
  static const bool on = !env_turned_off("AERIE_GEMM_LT");
  return on;
}

// The largest power of two up to 256 that divides the address: cuBLASLt's algorithms state
// the alignment they need, and the preference says what the pointers guarantee.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

struct LtKey {
  int64_t m, n, k;
  int x_type, y_type;
  uint32_t align_x, align_w, align_y;
  bool operator==(const LtKey&) const = default;
};
struct LtKeyHash {
  size_t operator()(const LtKey& key) const {
    size_t h = std::hash<int64_t>()(key.m);
    for (int64_t v : {key.n, key.k, int64_t{key.x_type}, int64_t{key.y_type}, int64_t{key.align_x}, int64_t{key.align_w},
                      int64_t{key.align_y}})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

// One shape's descriptors and chosen algorithm (ok = false: cuBLASLt offered nothing usable).
// `borrowed`: the algorithm is its bucket's, run `borrowed_calls` times so far.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
  bool borrowed = false;
  int64_t borrowed_calls = 0;
};

// The algorithm a tuning bucket's row counts reuse: timed at the bucket's own row count
// (`exact`), or, until that count comes, at the first count of the bucket that was timed.
struct LtBucketAlgo {
  cublasLtMatmulAlgo_t algo{};
  bool exact = false;
};

struct LtState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  void* flush = nullptr;  // twice the L2, rewritten before each timed run
  size_t flush_bytes = 0;
  std::unordered_map<LtKey, LtPlan, LtKeyHash> plans;
  std::unordered_map<LtKey, LtBucketAlgo, LtKeyHash> buckets;  // keyed with m = the bucket
  GemmTuningCounts counts;
  LtState() {
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) handle = nullptr;
  }
  ~LtState() {
    for (auto& [key, plan] : plans) {
      if (plan.op) cublasLtMatmulDescDestroy(plan.op);
      for (auto* l : {plan.a, plan.b, plan.c})
        if (l) cublasLtMatrixLayoutDestroy(l);
    }
    if (handle) cublasLtDestroy(handle);
    if (workspace) cudaFree(workspace);
    if (flush) cudaFree(flush);
  }
};

LtState& thread_lt() {
  thread_local LtState s;
  return s;
}

// Row-major y[m,n] = x[m,k] w[n,k]^T is column-major y^T[n,m] = op(A) B with A the column-major
// [k,n] view of w (transposed) and B the column-major [k,m] view of x.
bool describe(LtPlan& plan, const LtKey& key, DType xt, DType yt) {
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  if (cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return false;
  cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  return cublasLtMatrixLayoutCreate(&plan.a, cuda_type(xt), static_cast<uint64_t>(key.k), static_cast<uint64_t>(key.n), key.k) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatrixLayoutCreate(&plan.b, cuda_type(xt), static_cast<uint64_t>(key.k), static_cast<uint64_t>(key.m), key.k) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatrixLayoutCreate(&plan.c, cuda_type(yt), static_cast<uint64_t>(key.n), static_cast<uint64_t>(key.m), key.n) ==
             CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t run(LtState& s, const LtPlan& plan, const cublasLtMatmulAlgo_t& algo, const MatmulParams& p, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(s.handle, plan.op, &alpha, p.w.data, plan.a, p.x.data, plan.b, &beta, p.y.data, plan.c, p.y.data, plan.c, &algo,
                        s.workspace, kLtWorkspaceBytes, stream);
}

// The heuristic's candidates for this shape, each timed on the real tensors (the stream is
// synchronized first and after); the fastest is kept. Each timed run starts with L2 holding
// other bytes, as in a decode step, where every weight comes from HBM once: timed back to
// back, a weight that fits L2 (o_proj, 33.5 MB) would favour the algorithms that reuse it.
void tune(LtState& s, LtPlan& plan, const LtKey& key, const MatmulParams& p, cudaStream_t stream) {
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return;
  const uint64_t ws = kLtWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.align_w, sizeof(key.align_w));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.align_x, sizeof(key.align_x));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.align_y, sizeof(key.align_y));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.align_y, sizeof(key.align_y));
  cublasLtMatmulHeuristicResult_t found[kLtCandidates];
  int count = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(s.handle, plan.op, plan.a, plan.b, plan.c, plan.c, pref, kLtCandidates, found, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || count == 0) return;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaStreamSynchronize(stream);
  float best = 0.0f;
  int chosen = -1;
  for (int i = 0; i < count; ++i) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS || run(s, plan, found[i].algo, p, stream) != CUBLAS_STATUS_SUCCESS) continue;
    float total = 0.0f;
    bool ok = true;
    for (int r = 0; r < kLtTimedRuns && ok; ++r) {
      cudaMemsetAsync(s.flush, r & 0xff, s.flush_bytes, stream);
      cudaEventRecord(start, stream);
      ok = run(s, plan, found[i].algo, p, stream) == CUBLAS_STATUS_SUCCESS;
      cudaEventRecord(stop, stream);
      float ms = 0.0f;
      ok = ok && cudaEventSynchronize(stop) == cudaSuccess && cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
      total += ms;
    }
    if (!ok) continue;
    if (chosen < 0 || total < best) {
      best = total;
      chosen = i;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGetLastError();  // a candidate that failed to launch leaves no error behind
  if (chosen < 0) return;
  plan.algo = found[chosen].algo;
  plan.ok = true;
  AERIE_LOG_DEBUG("gemm (cuBLASLt) m " << key.m << " n " << key.n << " k " << key.k << ": candidate " << chosen << " of " << count << ", "
                                       << 1000.0f * best / kLtTimedRuns << " us");
}

// Whether `algo` (chosen for another row count) runs the plan's exact shape within the workspace.
bool algo_serves(const LtState& s, const LtPlan& plan, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t checked{};
  return cublasLtMatmulAlgoCheck(s.handle, plan.op, plan.a, plan.b, plan.c, plan.c, &algo, &checked) == CUBLAS_STATUS_SUCCESS &&
         checked.state == CUBLAS_STATUS_SUCCESS && checked.workspaceSize <= kLtWorkspaceBytes;
}

// A new shape's algorithm: its bucket's where that serves (not under ExactGemmTuning), else timed (and then the bucket's,
// where the bucket has none yet or this is the bucket's own row count).
void choose(LtState& s, LtPlan& plan, const LtKey& key, const MatmulParams& p, cudaStream_t stream) {
  LtKey bucket_key = key;
  bucket_key.m = gemm_tuning_bucket(key.m);
  auto b = s.buckets.find(bucket_key);
  if (gemm_tuning_buckets() && !ExactGemmTuning::active() && key.m != bucket_key.m && b != s.buckets.end() &&
      algo_serves(s, plan, b->second.algo)) {
    plan.algo = b->second.algo;
    plan.ok = true;
    plan.borrowed = true;
    ++s.counts.reused;
    return;
  }
  tune(s, plan, key, p, stream);
  ++s.counts.tuned;
  if (plan.ok && (b == s.buckets.end() || (key.m == bucket_key.m && !b->second.exact)))
    s.buckets[bucket_key] = {.algo = plan.algo, .exact = key.m == bucket_key.m};
}

// A borrowed algorithm's shape is timed for itself once it recurs (gemm_retune_after calls) or a
// graph warm-up runs it; never under capture (timing synchronizes). Where no candidate can be timed,
// the borrowed algorithm stays.
void retune_if_due(LtState& s, LtPlan& plan, const LtKey& key, const MatmulParams& p, cudaStream_t stream) {
  const int64_t after = gemm_retune_after();
  ++plan.borrowed_calls;
  if (!ExactGemmTuning::active() && (after <= 0 || plan.borrowed_calls < after)) return;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone) return;
  plan.borrowed = false;
  tune(s, plan, key, p, stream);
  ++s.counts.retuned;
}

}  // namespace

GemmTuningCounts gemm_tuning_counts() { return thread_lt().counts; }

bool matmul_lt(const MatmulParams& p, cudaStream_t stream) {
  const DType xt = p.x.dtype, yt = p.y.dtype;
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  if (!lt_enabled() || m > kLtMaxRows || (xt != DType::kBF16 && xt != DType::kF16) || p.w.dtype != xt || (yt != xt && yt != DType::kF32))
    return false;
  LtState& s = thread_lt();
  if (!s.handle) return false;
  const LtKey key{m, n, k, static_cast<int>(xt), static_cast<int>(yt), alignment_of(p.x.data), alignment_of(p.w.data), alignment_of(p.y.data)};
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    // Tuning synchronizes and times: never under capture (the graph runners ran this shape
    // eagerly first; a shape that was not stays with cublasGemmEx).
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone) return false;
    if (!s.workspace || !s.flush) {
      int device = 0, l2 = 0;
      cudaGetDevice(&device);
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
      s.flush_bytes = 2 * static_cast<size_t>(std::max(l2, 1 << 20));
      if ((!s.workspace && cudaMalloc(&s.workspace, kLtWorkspaceBytes) != cudaSuccess) ||
          (!s.flush && cudaMalloc(&s.flush, s.flush_bytes) != cudaSuccess)) {
        cudaGetLastError();
        return false;  // what was allocated stays; a later call tries again
      }
    }
    it = s.plans.emplace(key, LtPlan{}).first;
    if (describe(it->second, key, xt, yt)) choose(s, it->second, key, p, stream);
  }
  LtPlan& plan = it->second;
  if (!plan.ok) return false;
  if (plan.borrowed) retune_if_due(s, plan, key, p, stream);
  return run(s, plan, plan.algo, p, stream) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace aerie::kernels::cuda
