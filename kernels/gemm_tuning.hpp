#pragma once
// How the CUDA backend's tuned cuBLASLt products (kernels/cuda/ops_matmul_lt.cu) share their
// tuning between row counts. Host code, so the rule is tested on the CPU.
//
// The first product of a shape times cuBLASLt's candidate algorithms on the real tensors (16
// candidates, 6 runs each behind an L2 flush: 4-15 ms a weight shape on an H100). Decode and verify
// batches have few row counts (the graph buckets), but eager batches do not: a mixed batch (decode
// rows + a prompt chunk) or several short prompts give any count from 17 to 256, and each new
// one would pay that time on every layer shape of the model once. So a row count tunes at once only
// where it is a power of two, where its bucket (the next power of two) has no algorithm yet, or
// under ExactGemmTuning (graph warm-ups); any other first borrows the bucket's algorithm once
// cuBLASLt confirms it serves the exact shape. A borrowed algorithm is a fair guess, not the best
// (on an H100, 8B and 1B shapes, rows 17-256: median 0.9-1.17x the own algorithm's time, worst
// 2.4x), so a row count that recurs is timed for itself after gemm_retune_after() calls with the
// borrowed one: a count seen a few times never pays, one a server meets all day runs its own.
#include <cstdint>

namespace aerie::kernels {

// The tuning bucket of m rows: the smallest power of two >= m (m >= 1).
int64_t gemm_tuning_bucket(int64_t m);

// This thread's tuned products since it started: shapes timed, and shapes that took their
// bucket's algorithm without timing. Zero on a build without CUDA.
// `retuned`: borrowed shapes timed later for themselves (counted in neither of the others).
struct GemmTuningCounts {
  int64_t tuned = 0;
  int64_t reused = 0;
  int64_t retuned = 0;
};
GemmTuningCounts gemm_tuning_counts();

// While one lives on a thread, every new row count on it is timed for its own algorithm, as the
// graph runners' eager first runs want (spec/graph_capture.hpp): a captured graph replays its
// row count for the whole run, where an eager batch's count may come once. Scopes nest.
class ExactGemmTuning {
 public:
  ExactGemmTuning();
  ~ExactGemmTuning();
  ExactGemmTuning(const ExactGemmTuning&) = delete;
  ExactGemmTuning& operator=(const ExactGemmTuning&) = delete;
  // Whether one lives on this thread now.
  static bool active();
};

// How many products a shape runs with a borrowed algorithm before it is timed for itself (each
// layer's product counts: 256 calls are 8 forwards of a 32-layer model). Default 256,
// AERIE_GEMM_LT_RETUNE_AFTER overrides it; 0 or less never retimes. The setter is for tests.
constexpr int64_t kGemmRetuneAfterCalls = 256;
int64_t gemm_retune_after();
void set_gemm_retune_after(int64_t calls);

// Whether row counts share by bucket: true by default, false (AERIE_GEMM_LT_BUCKETS=0, for
// measuring) times every new row count at its first call. The setter is for tests.
bool gemm_tuning_buckets();
void set_gemm_tuning_buckets(bool on);

}  // namespace aerie::kernels
