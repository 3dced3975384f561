// NCCL communicator for CUDA tensors. Made non-blocking (ncclConfig_t.blocking = 0): every
// call may return ncclInProgress, and the communicator's state is polled until it settles or
// the deadline passes, when the communicator is aborted and an error thrown, instead of
// waiting forever on a peer that is gone. Collectives are enqueued on the caller's stream, so
// they are captured into CUDA graphs with the kernels around them.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/error.hpp"
#include "parallel/communicator.hpp"

// Evaluates to true when the call is still in progress (a non-blocking communicator's
// answer until it has enqueued the work), throws on an error.
#define AERIE_NCCL_CHECK(expr)                                                                         \
  [&] {                                                                                                \
    ncclResult_t aerie_nccl_rc_ = (expr);                                                              \
    if (aerie_nccl_rc_ != ncclSuccess && aerie_nccl_rc_ != ncclInProgress)                             \
      AERIE_FAIL(#expr << ": " << ncclGetErrorString(aerie_nccl_rc_) << " (" << ncclGetLastError(nullptr) << ")"); \
    return aerie_nccl_rc_ == ncclInProgress;                                                           \
  }()

namespace aerie::parallel {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kU8: return ncclUint8;
  }
  AERIE_FAIL("no NCCL type for " << dtype_name(t));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ProcessGroup& group, std::chrono::milliseconds timeout) : rank_(group.rank()), size_(group.size()), timeout_(timeout) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank_ == 0) AERIE_NCCL_CHECK(ncclGetUniqueId(&id));
    group.broadcast({reinterpret_cast<uint8_t*>(&id), sizeof id}, 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    AERIE_NCCL_CHECK(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config));
    settle("ncclCommInitRankConfig");
  }
  ~NcclCommunicator() override {
    if (!comm_) return;
    if (!aborted_) {
      // Flush, then free; a peer that is gone turns this into an abort after the deadline.
      ncclCommFinalize(comm_);
      try {
        settle("ncclCommFinalize");
      } catch (...) {
        return;  // settle() aborted it
      }
      ncclCommDestroy(comm_);
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(const TensorView& x, const Stream& stream) override {
    check(x, "all_reduce_sum");
    const bool pending = AERIE_NCCL_CHECK(ncclAllReduce(x.data, x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype), ncclSum, comm_, as_stream(stream)));
    if (pending) settle("ncclAllReduce");
  }
  void all_gather(const TensorView& in, const TensorView& out, const Stream& stream) override {
    check(in, "all_gather");
    check(out, "all_gather");
    check_all_gather(in, out);
    const bool pending = AERIE_NCCL_CHECK(ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()), nccl_type(in.dtype), comm_, as_stream(stream)));
    if (pending) settle("ncclAllGather");
  }
  void reduce_scatter_sum(const TensorView& in, const TensorView& out, const Stream& stream) override {
    check(in, "reduce_scatter_sum");
    check(out, "reduce_scatter_sum");
    check_reduce_scatter(in, out);
    const bool pending = AERIE_NCCL_CHECK(ncclReduceScatter(in.data, out.data, static_cast<size_t>(out.numel()), nccl_type(in.dtype), ncclSum, comm_,
                                       as_stream(stream)));
    if (pending) settle("ncclReduceScatter");
  }
  void broadcast(const TensorView& x, int root, const Stream& stream) override {
    check(x, "broadcast");
    const bool pending = AERIE_NCCL_CHECK(ncclBroadcast(x.data, x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype), root, comm_, as_stream(stream)));
    if (pending) settle("ncclBroadcast");
  }
  void abort() override {
    if (comm_ && !aborted_) {
      aborted_ = true;
      ncclCommAbort(comm_);
    }
  }

 private:
  static cudaStream_t as_stream(const Stream& s) { return static_cast<cudaStream_t>(s.handle()); }
  void check(const TensorView& t, const char* what) const {
    AERIE_CHECK(!aborted_, what << ": the NCCL communicator was aborted");
    AERIE_CHECK(t.device == Device::kCuda, what << ": NCCL takes CUDA tensors, got " << t.describe());
  }
  // Polls the communicator until the last call has been enqueued (or failed); past the
  // deadline, aborts it. A collective is usually enqueued at once or within microseconds:
  // spin (yielding) first, sleep only once it is clearly waiting on a peer.
  void settle(const char* what) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout_;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        abort();
        AERIE_FAIL(what << " failed on rank " << rank_ << " of " << size_ << ": " << ncclGetErrorString(state));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abort();
        AERIE_FAIL(what << ": no progress within " << timeout_.count() << " ms on rank " << rank_ << " of " << size_
                        << " (a peer is stuck or gone); the communicator was aborted");
      }
      if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(20)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  ncclComm_t comm_ = nullptr;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  bool aborted_ = false;
};

}  // namespace

bool nccl_available() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(ProcessGroup& group, std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCommunicator>(group, timeout);
}

}  // namespace aerie::parallel
