// Communicators that need no GPU library: a group of one, and CPU tensors over a
// ProcessGroup (MPI under mpirun).
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/env_knob.hpp"
#include "kernels/error.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/staging.hpp"
#include "parallel/communicator.hpp"

namespace aerie::parallel {

void Communicator::all_reduce_residual_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight, const TensorView& y,
                                                float eps, const Stream& stream) {
  all_reduce_sum(x, stream);
  AERIE_CHECK_STATUS(kernels::rms_norm({.x = x, .weight = weight, .residual = residual, .y = y, .eps = eps}, stream));
}

void Communicator::check_all_gather(const TensorView& in, const TensorView& out) const {
  AERIE_CHECK(in.dtype == out.dtype && out.nbytes() == in.nbytes() * size(),
              "all_gather: out " << out.describe() << " must hold " << size() << " x in " << in.describe());
}

void Communicator::check_reduce_scatter(const TensorView& in, const TensorView& out) const {
  AERIE_CHECK(in.dtype == out.dtype && in.numel() == out.numel() * size(),
              "reduce_scatter_sum: in " << in.describe() << " must hold " << size() << " x out " << out.describe());
}

namespace {

void check_float(const TensorView& t, const char* what) {
  AERIE_CHECK(is_floating(t.dtype), what << ": " << t.describe() << " is not a float tensor");
}

class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(const TensorView&, const Stream&) override {}
  void all_gather(const TensorView& in, const TensorView& out, const Stream& stream) override {
    check_all_gather(in, out);
    if (in.data != out.data) copy_async(out.data, in.data, static_cast<size_t>(in.nbytes()), stream);
  }
  void reduce_scatter_sum(const TensorView& in, const TensorView& out, const Stream& stream) override {
    all_gather(in, out, stream);
  }
  void broadcast(const TensorView&, int root, const Stream&) override { AERIE_CHECK(root == 0, "broadcast root " << root << " of 1 rank"); }
};

// CPU tensors through the group's byte all-gather. Sums add every rank's values in rank
// order on every rank, so all ranks hold the same bits (MPI_Allreduce promises no such
// thing); CPU tensors in tests are small, so the extra traffic does not matter.
// The failure drills (tests/launch/drill_test.py) need a rank that hangs inside a collective
// while its process stays alive: AERIE_DRILL_STALL_ALL_REDUCE=N makes this process's N-th
// all-reduce sleep for an hour first (set it on one rank only). Unset: never.
void stall_for_drill() {
  static const int at = kernels::env_knob("AERIE_DRILL_STALL_ALL_REDUCE");
  static std::atomic<int> calls{0};
  if (at > 0 && ++calls == at) std::this_thread::sleep_for(std::chrono::hours(1));
}

class HostCommunicator final : public Communicator {
 public:
  explicit HostCommunicator(ProcessGroup& g) : g_(g) {}
  int rank() const override { return g_.rank(); }
  int size() const override { return g_.size(); }

  void all_reduce_sum(const TensorView& x, const Stream& stream) override {
    check_cpu(x, "all_reduce_sum", stream);
    check_float(x, "all_reduce_sum");
    stall_for_drill();
    gather_all(x);
    sum_block(0, x);
  }
  void all_gather(const TensorView& in, const TensorView& out, const Stream& stream) override {
    check_cpu(in, "all_gather", stream);
    check_cpu(out, "all_gather", stream);
    check_all_gather(in, out);
    g_.all_gather_bytes({static_cast<const uint8_t*>(in.data), static_cast<size_t>(in.nbytes())},
                        {static_cast<uint8_t*>(out.data), static_cast<size_t>(out.nbytes())});
  }
  void reduce_scatter_sum(const TensorView& in, const TensorView& out, const Stream& stream) override {
    check_cpu(in, "reduce_scatter_sum", stream);
    check_cpu(out, "reduce_scatter_sum", stream);
    check_float(in, "reduce_scatter_sum");
    check_reduce_scatter(in, out);
    gather_all(in);
    sum_block(out.numel() * rank(), out);
  }
  void broadcast(const TensorView& x, int root, const Stream& stream) override {
    check_cpu(x, "broadcast", stream);
    g_.broadcast({static_cast<uint8_t*>(x.data), static_cast<size_t>(x.nbytes())}, root);
  }

 private:
  static void check_cpu(const TensorView& t, const char* what, const Stream& stream) {
    AERIE_CHECK(t.device == Device::kCpu && stream.device() == Device::kCpu,
                what << ": the host communicator takes CPU tensors on a CPU stream, got " << t.describe());
  }
  // scratch_ = every rank's copy of t, in rank order.
  void gather_all(const TensorView& t) {
    scratch_.resize(static_cast<size_t>(t.nbytes() * size()));
    g_.all_gather_bytes({static_cast<const uint8_t*>(t.data), static_cast<size_t>(t.nbytes())}, scratch_);
    dtype_ = t.dtype;
    stride_ = t.numel();
  }
  // out[i] = sum over ranks r (in order) of rank r's element first + i.
  void sum_block(int64_t first, const TensorView& out) {
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      float s = 0.0f;
      for (int r = 0; r < size(); ++r) s += load_as_float(scratch_.data(), dtype_, r * stride_ + first + i);
      store_from_float(out.data, out.dtype, i, s);
    }
  }
  ProcessGroup& g_;
  std::vector<uint8_t> scratch_;
  DType dtype_ = DType::kF32;
  int64_t stride_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }
std::unique_ptr<Communicator> make_host_communicator(ProcessGroup& group) { return std::make_unique<HostCommunicator>(group); }

std::unique_ptr<Communicator> make_communicator(ProcessGroup& group, Device device, const CommunicatorOptions& o) {
  if (group.size() == 1) return make_single_communicator();
  if (device == Device::kCpu) return make_host_communicator(group);
  auto nccl = make_nccl_communicator(group, o.timeout);
  return o.custom_all_reduce ? make_ipc_communicator(group, std::move(nccl)) : std::move(nccl);
}

}  // namespace aerie::parallel
