// A one-shot all-reduce over CUDA IPC and NVLink for the mid-size messages of a decode step
// at batch 32-256 (sglang's custom all-reduce, TensorRT-LLM's one-shot kernels), with NCCL
// for everything else. Each rank owns buffers in device memory that every other rank of the node has mapped
// (cudaIpcOpenMemHandle). One kernel per all-reduce, on a fixed grid:
//   1. push: each block stores its slice of this rank's input into this rank's slot of
//      every rank's buffer (NVLink stores);
//   2. barrier: it raises this rank's flag in the matching block's slot on every rank and
//      waits for every rank's flag in its own (flags count up from a per-block counter kept
//      on the device, so a CUDA graph replays correctly);
//   3. it sums the slots of its own buffer in rank order, in fp32: every rank gets the same
//      bits.
// Buffers alternate between two phases, so no second barrier is needed: a rank can only
// run one call ahead of the slowest (the next barrier waits for it), and that call writes
// the other phase. The fixed grid keeps every index in the same block from call to call, so
// a block's barrier covers exactly the data it reads.
// Messages of kMinBytes to kSlotBytes whose size is a multiple of 16 bytes go this way; the
// rest go to NCCL. (A variant fusing the residual add and RMSNorm into the kernel was
// measured and dropped: no faster than NCCL followed by the norm kernel at 1-16 rows.) The kernel has no deadline: a peer that never arrives stops the GPU, as a NCCL
// collective would (the failure-handling work puts watchdogs around both).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/error.hpp"
#include "parallel/communicator.hpp"

namespace aerie::parallel {

namespace {

constexpr int kMaxRanks = 8;
constexpr int kBlocks = 32;  // the fixed grid of both channels
constexpr int kThreads = 512;
constexpr size_t kSlotBytes = size_t{2} << 20;  // the largest message (256 rows of 4096 bf16)
// The smallest: below it NCCL's own low-latency path, replayed from a CUDA graph, was as fast
// or faster on 2 x H200 (6.4 against 7.1 us at 8 KB; the kernel wins from 256 KB on: 8.2
// against 8.5 us, 12.2 against 13.9 at 1 MB, 17.9 against 27.2 at 2 MB; docs/performance.md).
constexpr size_t kMinBytes = size_t{256} << 10;

#define AERIE_CUDA_OK(expr)                                                                       \
  do {                                                                                            \
    cudaError_t aerie_cuda_rc_ = (expr);                                                          \
    AERIE_CHECK(aerie_cuda_rc_ == cudaSuccess, #expr << ": " << cudaGetErrorString(aerie_cuda_rc_)); \
  } while (0)

struct Flags {
  uint32_t start[kBlocks][kMaxRanks];
  uint32_t counter[kBlocks];
};

// The channel as every rank sees it: each rank's flags and data (2 phases x ranks slots).
struct Channel {
  Flags* flags[kMaxRanks];
  char* data[kMaxRanks];
};

__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// This rank's slot of phase `phase` in rank q's buffer.
__device__ __forceinline__ uint4* slot(const Channel& c, int q, int phase, int ranks, int rank) {
  return reinterpret_cast<uint4*>(c.data[q] + (static_cast<size_t>(phase) * ranks + rank) * kSlotBytes);
}

// Every thread's pushes are made visible system-wide, then thread t < ranks signals rank t
// and waits for rank t's signal.
__device__ __forceinline__ void barrier(const Channel& c, int rank, int ranks, uint32_t flag) {
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x < ranks) {
    store_release(&c.flags[threadIdx.x]->start[blockIdx.x][rank], flag);
    // At least `flag`: a peer that has passed this barrier may already have raised the
    // next call's flag here (flags only grow; the difference is taken mod 2^32).
    const uint32_t* mine = &c.flags[rank]->start[blockIdx.x][threadIdx.x];
    while (static_cast<int32_t>(load_acquire(mine) - flag) < 0) {
    }
  }
  __syncthreads();
}

template <class T>
struct Vec {
  static constexpr int kN = 16 / sizeof(T);
  float v[kN];
  __device__ __forceinline__ void add(const uint4& u) {
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] += static_cast<float>(e[k]);
  }
  // Rounded to T as the stored tensors are.
  __device__ __forceinline__ uint4 pack() const {
    uint4 o;
    T* e = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int k = 0; k < kN; ++k) e[k] = static_cast<T>(v[k]);
    return o;
  }
};

template <class T>
__global__ void __launch_bounds__(kThreads) push_all_reduce(uint4* x, Channel c, int rank, int ranks, int64_t vecs) {
  Flags* me = c.flags[rank];
  const uint32_t flag = me->counter[blockIdx.x] + 1;
  const int phase = flag & 1;
  const int64_t stride = static_cast<int64_t>(kBlocks) * kThreads;
  const int64_t first = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  for (int64_t i = first; i < vecs; i += stride) {
    const uint4 v = x[i];
    for (int q = 0; q < ranks; ++q) slot(c, q, phase, ranks, rank)[i] = v;
  }
  barrier(c, rank, ranks, flag);
  for (int64_t i = first; i < vecs; i += stride) {
    Vec<T> acc{};
    for (int q = 0; q < ranks; ++q) acc.add(__ldcg(slot(c, rank, phase, ranks, q) + i));  // from L2: never a stale L1 line
    x[i] = acc.pack();
  }
  if (threadIdx.x == 0) me->counter[blockIdx.x] = flag;
}

// The channel's memory on this rank, and its peers' mapped.
class ChannelMemory {
 public:
  ChannelMemory(ProcessGroup& group) {
    const int ranks = group.size(), rank = group.rank();
    const size_t bytes = sizeof(Flags) + 2 * static_cast<size_t>(ranks) * kSlotBytes;
    AERIE_CUDA_OK(cudaMalloc(&base_, bytes));
    AERIE_CUDA_OK(cudaMemset(base_, 0, bytes));
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
      view_.flags[r] = reinterpret_cast<Flags*>(at);
      view_.data[r] = at + sizeof(Flags);
    }
  }
  ~ChannelMemory() {
    for (char* p : opened_) cudaIpcCloseMemHandle(p);
    if (base_) cudaFree(base_);
  }
  ChannelMemory(const ChannelMemory&) = delete;
  ChannelMemory& operator=(const ChannelMemory&) = delete;
  const Channel& view() const { return view_; }

 private:
  char* base_ = nullptr;
  std::vector<char*> opened_;
  Channel view_{};
};

bool fits(const TensorView& t) {
  const size_t bytes = static_cast<size_t>(t.nbytes());
  return t.device == Device::kCuda && bytes >= kMinBytes && bytes <= kSlotBytes && bytes % 16 == 0 &&
         reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
}

// NCCL for everything, the IPC kernel for mid-size all-reduces.
class IpcCommunicator final : public Communicator {
 public:
  IpcCommunicator(ProcessGroup& group, std::unique_ptr<Communicator> nccl)
      : nccl_(std::move(nccl)), rank_(group.rank()), size_(group.size()), plain_(group) {
    group.barrier();  // every rank has mapped every buffer before the first kernel
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(const TensorView& x, const Stream& stream) override {
    if (!fits(x) || !(x.dtype == DType::kBF16 || x.dtype == DType::kF16 || x.dtype == DType::kF32)) {
      nccl_->all_reduce_sum(x, stream);
      return;
    }
    const int64_t vecs = x.nbytes() / 16;
    auto* v = static_cast<uint4*>(x.data);
    auto s = static_cast<cudaStream_t>(stream.handle());
    if (x.dtype == DType::kBF16) push_all_reduce<__nv_bfloat16><<<kBlocks, kThreads, 0, s>>>(v, plain_.view(), rank_, size_, vecs);
    else if (x.dtype == DType::kF16) push_all_reduce<__half><<<kBlocks, kThreads, 0, s>>>(v, plain_.view(), rank_, size_, vecs);
    else push_all_reduce<float><<<kBlocks, kThreads, 0, s>>>(v, plain_.view(), rank_, size_, vecs);
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
  ChannelMemory plain_;
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
