// One-shot all-reduces over CUDA IPC and NVLink for the messages of a decode step
// (TensorRT-LLM's Lamport one-shot kernels; sglang's custom all-reduce), with NCCL for
// everything else. Each rank owns buffers that every other rank of the node has mapped
// (cudaIpcOpenMemHandle), three phases of one slot per rank, every 2-byte element of which
// holds the sentinel -0.0 (0x8000) until data arrives. One kernel per all-reduce, no flags:
//   1. push: each thread stores its 16 bytes of this rank's input (any -0.0 written as +0.0)
//      into this rank's slot of the call's phase on every rank (NVLink stores);
//   2. it polls its own buffer's slots (volatile loads) until no element of its 16 bytes is
//      the sentinel, and sums the ranks' values in rank order in fp32: every rank gets the
//      same bits;
//   3. it resets to the sentinel what the previous call read here: that phase is written
//      again two calls later, which no peer can reach before this call's data has been read.
// The call counter and the previous call's size live on the device (the last block to finish
// advances them), so a CUDA graph replays correctly; the kernel is launched with programmatic
// dependent launch like Aerie's other kernels, and waits for its predecessor before reading.
// A second channel works by rows and fuses what follows a row-parallel layer: x = the sum;
// residual += x; y = rmsnorm(residual) * weight (kernels/rms_norm.hpp's numbers).
// bf16 / f16 messages up to kSlotBytes whose size is a multiple of 16 bytes go this way; the
// rest go to NCCL. The kernel has no deadline: a peer that never arrives stops the GPU, as a
// NCCL collective would (the failure-handling work puts watchdogs around both).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/error.hpp"
#include "parallel/communicator.hpp"

namespace aerie::parallel {

namespace {

using kernels::cuda::block_sum;
using kernels::cuda::launch_pdl;
using kernels::cuda::pdl_trigger;
using kernels::cuda::pdl_wait;

constexpr int kMaxRanks = 8;
constexpr int kThreads = 512;
constexpr int kMaxBlocks = 132;
constexpr size_t kSlotBytes = size_t{2} << 20;  // the largest message (256 rows of 4096 bf16)
constexpr uint16_t kSentinel = 0x8000;          // -0.0 in bf16 and f16

#define AERIE_CUDA_OK(expr)                                                                       \
  do {                                                                                            \
    cudaError_t aerie_cuda_rc_ = (expr);                                                          \
    AERIE_CHECK(aerie_cuda_rc_ == cudaSuccess, #expr << ": " << cudaGetErrorString(aerie_cuda_rc_)); \
  } while (0)

// A channel's bookkeeping on each rank (its own; peers never touch it).
struct State {
  uint32_t call;       // calls made on this channel
  uint32_t arrivals;   // blocks of the running call that have finished
  int64_t last_vecs;   // 16-byte vectors of the previous call (what to reset)
};

// The channel as this rank sees it: every rank's data (3 phases x ranks slots) and this rank's state.
struct Channel {
  char* data[kMaxRanks];
  State* state;
};

__device__ __forceinline__ uint4* slot(const Channel& c, int q, int phase, int ranks, int src) {
  return reinterpret_cast<uint4*>(c.data[q] + (static_cast<size_t>(phase) * ranks + src) * kSlotBytes);
}

__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ bool has_sentinel(const uint4& v) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(&v);
  bool any = false;
#pragma unroll
  for (int k = 0; k < 8; ++k) any |= h[k] == kSentinel;
  return any;
}

// -0.0 would read as "not arrived": send +0.0 (the same number).
__device__ __forceinline__ uint4 scrub(uint4 v) {
  uint16_t* h = reinterpret_cast<uint16_t*>(&v);
#pragma unroll
  for (int k = 0; k < 8; ++k) h[k] = h[k] == kSentinel ? 0 : h[k];
  return v;
}

__device__ __forceinline__ uint4 sentinels() {
  const uint32_t s = (static_cast<uint32_t>(kSentinel) << 16) | kSentinel;
  return make_uint4(s, s, s, s);
}

template <class T>
struct Vec {
  float v[8];
  __device__ __forceinline__ void add(const uint4& u) {
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] += static_cast<float>(e[k]);
  }
  // Rounded to T as the stored tensors are.
  __device__ __forceinline__ uint4 pack() const {
    uint4 o;
    T* e = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int k = 0; k < 8; ++k) e[k] = static_cast<T>(v[k]);
    return o;
  }
};

// Vector i of this call: every rank's copy, polled until it has arrived, summed in rank order.
template <class T>
__device__ __forceinline__ Vec<T> gather_sum(const Channel& c, int rank, int ranks, int phase, int64_t i) {
  Vec<T> acc{};
  for (int q = 0; q < ranks; ++q) {
    const uint4* p = slot(c, rank, phase, ranks, q) + i;
    uint4 v = load_volatile(p);
    while (has_sentinel(v)) v = load_volatile(p);
    acc.add(v);
  }
  return acc;
}

// The end of a call: reset what the previous call left in this rank's buffer, and (last
// block) advance the call counter.
__device__ __forceinline__ void finish(const Channel& c, int rank, int ranks, uint32_t call, int64_t prev_vecs, int64_t vecs) {
  const int prev = static_cast<int>((call + 2) % 3);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int q = 0; q < ranks; ++q)
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < prev_vecs; i += stride)
      slot(c, rank, prev, ranks, q)[i] = sentinels();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&c.state->arrivals, 1u) == gridDim.x - 1) {
      c.state->arrivals = 0;
      c.state->last_vecs = vecs;
      c.state->call = call + 1;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) lamport_all_reduce(uint4* x, Channel c, int rank, int ranks, int64_t vecs) {
  pdl_wait();  // the previous kernel's x, and this channel's state, are final
  pdl_trigger();
  const uint32_t call = *reinterpret_cast<volatile uint32_t*>(&c.state->call);
  const int64_t prev_vecs = *reinterpret_cast<volatile int64_t*>(&c.state->last_vecs);
  const int phase = static_cast<int>(call % 3);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (int64_t i = first; i < vecs; i += stride) {
    const uint4 v = scrub(x[i]);
    for (int q = 0; q < ranks; ++q) slot(c, q, phase, ranks, rank)[i] = v;
  }
  for (int64_t i = first; i < vecs; i += stride) x[i] = gather_sum<T>(c, rank, ranks, phase, i).pack();
  finish(c, rank, ranks, call, prev_vecs, vecs);
}

// Rows r = blockIdx.x, + gridDim.x, ...: x = sum over ranks; residual += x; y = norm(residual) * w.
template <class T>
__global__ void __launch_bounds__(kThreads) lamport_all_reduce_norm(uint4* x, uint4* residual, const uint4* weight, uint4* y, Channel c,
                                                                    int rank, int ranks, int64_t rows, int64_t row_vecs, int64_t hidden,
                                                                    float eps) {
  __shared__ float scratch[32];
  pdl_wait();
  pdl_trigger();
  const uint32_t call = *reinterpret_cast<volatile uint32_t*>(&c.state->call);
  const int64_t prev_vecs = *reinterpret_cast<volatile int64_t*>(&c.state->last_vecs);
  const int phase = static_cast<int>(call % 3);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    for (int64_t j = threadIdx.x; j < row_vecs; j += blockDim.x) {
      const uint4 v = scrub(x[r * row_vecs + j]);
      for (int q = 0; q < ranks; ++q) slot(c, q, phase, ranks, rank)[r * row_vecs + j] = v;
    }
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < row_vecs; j += blockDim.x) {
      const int64_t i = r * row_vecs + j;
      const uint4 sum = gather_sum<T>(c, rank, ranks, phase, i).pack();
      x[i] = sum;
      // As rms_norm with a residual: the sum as stored, plus the residual, stored, read back.
      Vec<T> res{};
      res.add(sum);
      res.add(residual[i]);
      const uint4 stored = res.pack();
      residual[i] = stored;
      Vec<T> back{};
      back.add(stored);
#pragma unroll
      for (int k = 0; k < 8; ++k) ss += back.v[k] * back.v[k];
    }
    const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(hidden) + eps);
    for (int64_t j = threadIdx.x; j < row_vecs; j += blockDim.x) {
      const int64_t i = r * row_vecs + j;
      Vec<T> v{}, w{};
      v.add(residual[i]);
      w.add(weight[j]);
#pragma unroll
      for (int k = 0; k < 8; ++k) v.v[k] = w.v[k] * (v.v[k] * inv);
      y[i] = v.pack();
    }
  }
  finish(c, rank, ranks, call, prev_vecs, rows * row_vecs);
}

__global__ void fill_sentinels(uint4* p, int64_t vecs) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vecs; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = sentinels();
}

// A channel's memory on this rank, and its peers' mapped.
class ChannelMemory {
 public:
  explicit ChannelMemory(ProcessGroup& group) {
    const int ranks = group.size(), rank = group.rank();
    const size_t data_bytes = 3 * static_cast<size_t>(ranks) * kSlotBytes;
    AERIE_CUDA_OK(cudaMalloc(&base_, data_bytes));
    fill_sentinels<<<1024, 256>>>(reinterpret_cast<uint4*>(base_), static_cast<int64_t>(data_bytes / 16));
    AERIE_CUDA_OK(cudaMalloc(&state_, sizeof(State)));
    AERIE_CUDA_OK(cudaMemset(state_, 0, sizeof(State)));
    AERIE_CUDA_OK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t handle;
    AERIE_CUDA_OK(cudaIpcGetMemHandle(&handle, base_));
    std::vector<uint8_t> all(sizeof handle * static_cast<size_t>(ranks));
    group.all_gather_bytes({reinterpret_cast<const uint8_t*>(&handle), sizeof handle}, all);
    for (int r = 0; r < ranks; ++r) {
      char* at = base_;
      if (r != rank) {
        cudaIpcMemHandle_t h;
        std::memcpy(&h, all.data() + sizeof h * static_cast<size_t>(r), sizeof h);
        void* mapped = nullptr;
        AERIE_CUDA_OK(cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess));
        at = static_cast<char*>(mapped);
        opened_.push_back(at);
      }
      view_.data[r] = at;
    }
    view_.state = state_;
  }
  ~ChannelMemory() {
    for (char* p : opened_) cudaIpcCloseMemHandle(p);
    if (state_) cudaFree(state_);
    if (base_) cudaFree(base_);
  }
  ChannelMemory(const ChannelMemory&) = delete;
  ChannelMemory& operator=(const ChannelMemory&) = delete;
  const Channel& view() const { return view_; }

 private:
  char* base_ = nullptr;
  State* state_ = nullptr;
  std::vector<char*> opened_;
  Channel view_{};
};

bool aligned(const TensorView& t) { return reinterpret_cast<uintptr_t>(t.data) % 16 == 0; }

bool fits(const TensorView& t) {
  const size_t bytes = static_cast<size_t>(t.nbytes());
  return t.device == Device::kCuda && (t.dtype == DType::kBF16 || t.dtype == DType::kF16) && bytes > 0 && bytes <= kSlotBytes &&
         bytes % 16 == 0 && aligned(t);
}

// NCCL for everything, the IPC kernels for bf16 / f16 all-reduces up to kSlotBytes.
class IpcCommunicator final : public Communicator {
 public:
  IpcCommunicator(ProcessGroup& group, std::unique_ptr<Communicator> nccl)
      : nccl_(std::move(nccl)), rank_(group.rank()), size_(group.size()), plain_(group), rows_(group) {
    group.barrier();  // every rank has mapped every buffer before the first kernel
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(const TensorView& x, const Stream& stream) override {
    if (!fits(x)) {
      nccl_->all_reduce_sum(x, stream);
      return;
    }
    const int64_t vecs = x.nbytes() / 16;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(kMaxBlocks, (vecs + kThreads - 1) / kThreads));
    auto* v = static_cast<uint4*>(x.data);
    auto s = static_cast<cudaStream_t>(stream.handle());
    if (x.dtype == DType::kBF16) launch_pdl(lamport_all_reduce<__nv_bfloat16>, dim3(blocks), dim3(kThreads), 0, s, v, plain_.view(), rank_, size_, vecs);
    else launch_pdl(lamport_all_reduce<__half>, dim3(blocks), dim3(kThreads), 0, s, v, plain_.view(), rank_, size_, vecs);
    AERIE_CUDA_OK(cudaGetLastError());
  }

  void all_reduce_residual_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight, const TensorView& y, float eps,
                                    const Stream& stream) override {
    if (!fits(x) || x.ndim != 2 || residual.dtype != x.dtype || weight.dtype != x.dtype || y.dtype != x.dtype ||
        residual.numel() != x.numel() || y.numel() != x.numel() || weight.numel() != x.dim(1) || (x.dim(1) * 2) % 16 != 0 ||
        !aligned(residual) || !aligned(weight) || !aligned(y)) {
      Communicator::all_reduce_residual_rms_norm(x, residual, weight, y, eps, stream);
      return;
    }
    const int64_t rows = x.dim(0), hidden = x.dim(1), row_vecs = hidden * 2 / 16;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(kMaxBlocks, rows));
    auto s = static_cast<cudaStream_t>(stream.handle());
    auto* px = static_cast<uint4*>(x.data);
    auto* pr = static_cast<uint4*>(residual.data);
    auto* pw = static_cast<const uint4*>(weight.data);
    auto* py = static_cast<uint4*>(y.data);
    const dim3 grid(blocks), block(kThreads);
    if (x.dtype == DType::kBF16)
      launch_pdl(lamport_all_reduce_norm<__nv_bfloat16>, grid, block, 0, s, px, pr, pw, py, rows_.view(), rank_, size_, rows, row_vecs, hidden, eps);
    else
      launch_pdl(lamport_all_reduce_norm<__half>, grid, block, 0, s, px, pr, pw, py, rows_.view(), rank_, size_, rows, row_vecs, hidden, eps);
    AERIE_CUDA_OK(cudaGetLastError());
  }

  void all_gather(const TensorView& in, const TensorView& out, const Stream& stream) override { nccl_->all_gather(in, out, stream); }
  void reduce_scatter_sum(const TensorView& in, const TensorView& out, const Stream& stream) override {
    nccl_->reduce_scatter_sum(in, out, stream);
  }
  void broadcast(const TensorView& x, int root, const Stream& stream) override { nccl_->broadcast(x, root, stream); }
  void abort() override { nccl_->abort(); }

 private:
  std::unique_ptr<Communicator> nccl_;
  int rank_, size_;
  ChannelMemory plain_, rows_;
};

}  // namespace
std::unique_ptr<Communicator> make_ipc_communicator(ProcessGroup& group, std::unique_ptr<Communicator> nccl) {
  // Every rank must see every other's GPU directly (one node, peer access): agreed on by all,
  // so that all take the same path.
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  int device = 0, count = 0;
  cudaGetDevice(&device);
  cudaGetDeviceCount(&count);
  std::vector<uint8_t> mine(sizeof host + sizeof(int)), all(mine.size() * static_cast<size_t>(group.size()));
  std::memcpy(mine.data(), host, sizeof host);
  std::memcpy(mine.data() + sizeof host, &device, sizeof(int));
  group.all_gather_bytes(mine, all);
  int64_t ok = group.size() <= kMaxRanks ? 1 : 0;
  for (int r = 0; r < group.size() && ok; ++r) {
    const uint8_t* e = all.data() + mine.size() * static_cast<size_t>(r);
    int peer_device = 0;
    std::memcpy(&peer_device, e + sizeof host, sizeof(int));
    if (std::memcmp(e, host, sizeof host) != 0 || peer_device >= count) {
      ok = 0;
    } else if (peer_device != device) {
      int can = 0;
      cudaDeviceCanAccessPeer(&can, device, peer_device);
      ok = can;
    }
  }
  for (int64_t v : group.all_gather(ok)) ok = ok && v;
  if (!ok) return nccl;
  return std::make_unique<IpcCommunicator>(group, std::move(nccl));
}

}  // namespace aerie::parallel
