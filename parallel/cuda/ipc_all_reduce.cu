// A one-shot all-reduce over CUDA IPC and NVLink for the small messages of a decode step
// (sglang's custom all-reduce, TensorRT-LLM's one-shot kernel), with NCCL for everything
// else. Each rank owns one buffer in device memory that every other rank of the node has
// mapped (cudaIpcOpenMemHandle). One kernel per all-reduce:
//   1. each block copies its slice of the input into this rank's buffer;
//   2. it raises this rank's flag in the matching block's slot on every rank and waits for
//      every rank's flag in its own slot (a barrier per block; flags count up from a
//      per-block counter kept on the device, so a CUDA graph replays correctly);
//   3. it sums the slice over all ranks' buffers, in rank order and in fp32, so every rank
//      gets the same bits;
//   4. a second barrier, so no rank overwrites its buffer while a peer still reads it.
// Messages up to kIpcMaxBytes whose size is a multiple of 16 bytes go this way; the rest go
// to NCCL. The kernel has no deadline: a peer that never arrives stops the GPU, as a NCCL
// collective would (the failure-handling work puts watchdogs around both).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/error.hpp"
#include "parallel/communicator.hpp"

namespace aerie::parallel {

namespace {

constexpr int kMaxRanks = 8;
constexpr int kMaxBlocks = 64;
constexpr int kThreads = 512;
constexpr size_t kIpcMaxBytes = size_t{8} << 20;

#define AERIE_CUDA_OK(expr)                                                                       \
  do {                                                                                            \
    cudaError_t aerie_cuda_rc_ = (expr);                                                          \
    AERIE_CHECK(aerie_cuda_rc_ == cudaSuccess, #expr << ": " << cudaGetErrorString(aerie_cuda_rc_)); \
  } while (0)

struct Flags {
  uint32_t start[kMaxBlocks][kMaxRanks];
  uint32_t end[kMaxBlocks][kMaxRanks];
  uint32_t counter[kMaxBlocks];
};

struct Peers {
  char* data[kMaxRanks];    // every rank's buffer, mapped here
  Flags* flags[kMaxRanks];  // every rank's flags, mapped here
};

__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Thread t < ranks signals rank t and waits for rank t.
__device__ __forceinline__ void barrier(uint32_t (*slot)[kMaxBlocks][kMaxRanks], const Peers& p, int rank, int ranks, uint32_t flag,
                                        bool end) {
  __syncthreads();
  if (threadIdx.x < ranks) {
    Flags* peer = p.flags[threadIdx.x];
    store_release(end ? &peer->end[blockIdx.x][rank] : &peer->start[blockIdx.x][rank], flag);
    const uint32_t* mine = &(*slot)[blockIdx.x][threadIdx.x];
    while (load_acquire(mine) != flag) {
    }
  }
  __syncthreads();
}

template <class T>
__device__ __forceinline__ void add_into(float (&acc)[16 / sizeof(T)], const uint4& v) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int k = 0; k < static_cast<int>(16 / sizeof(T)); ++k) {
    if constexpr (sizeof(T) == 4) acc[k] += e[k];
    else acc[k] += static_cast<float>(e[k]);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) one_shot_all_reduce(const uint4* in, uint4* out, Peers p, int rank, int ranks, int64_t vecs) {
  constexpr int kPer = 16 / sizeof(T);
  Flags* me = p.flags[rank];
  const uint32_t flag = me->counter[blockIdx.x] + 1;
  uint4* mine = reinterpret_cast<uint4*>(p.data[rank]);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vecs; i += stride) mine[i] = in[i];
  barrier(&me->start, p, rank, ranks, flag, false);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vecs; i += stride) {
    float acc[kPer] = {};
    for (int r = 0; r < ranks; ++r) add_into<T>(acc, __ldcg(reinterpret_cast<const uint4*>(p.data[r]) + i));  // L2, never a stale L1 line
    uint4 o;
    T* e = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int k = 0; k < kPer; ++k) e[k] = static_cast<T>(acc[k]);
    out[i] = o;
  }
  barrier(&me->end, p, rank, ranks, flag, true);
  if (threadIdx.x == 0) me->counter[blockIdx.x] = flag;
}

// NCCL for everything, the IPC kernel for small all-reduces.
class IpcCommunicator final : public Communicator {
 public:
  IpcCommunicator(ProcessGroup& group, std::unique_ptr<Communicator> nccl) : nccl_(std::move(nccl)), rank_(group.rank()), size_(group.size()) {
    AERIE_CHECK(size_ <= kMaxRanks, "the IPC all-reduce serves up to " << kMaxRanks << " ranks");
    const size_t bytes = sizeof(Flags) + kIpcMaxBytes;
    AERIE_CUDA_OK(cudaMalloc(&base_, bytes));
    AERIE_CUDA_OK(cudaMemset(base_, 0, bytes));
    AERIE_CUDA_OK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t handle;
    AERIE_CUDA_OK(cudaIpcGetMemHandle(&handle, base_));
    std::vector<uint8_t> all(sizeof handle * static_cast<size_t>(size_));
    group.all_gather_bytes({reinterpret_cast<const uint8_t*>(&handle), sizeof handle}, all);
    for (int r = 0; r < size_; ++r) {
      char* at = base_;
      if (r != rank_) {
        cudaIpcMemHandle_t h;
        std::memcpy(&h, all.data() + sizeof h * static_cast<size_t>(r), sizeof h);
        void* mapped = nullptr;
        AERIE_CUDA_OK(cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess));
        at = static_cast<char*>(mapped);
        opened_.push_back(at);
      }
      peers_.flags[r] = reinterpret_cast<Flags*>(at);
      peers_.data[r] = at + sizeof(Flags);
    }
    group.barrier();  // every rank has mapped every buffer before the first kernel
  }
  ~IpcCommunicator() override {
    for (char* p : opened_) cudaIpcCloseMemHandle(p);
    if (base_) cudaFree(base_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(const TensorView& x, const Stream& stream) override {
    const size_t bytes = static_cast<size_t>(x.nbytes());
    if (x.device != Device::kCuda || bytes > kIpcMaxBytes || bytes % 16 != 0 || bytes == 0 ||
        reinterpret_cast<uintptr_t>(x.data) % 16 != 0) {
      nccl_->all_reduce_sum(x, stream);
      return;
    }
    const int64_t vecs = static_cast<int64_t>(bytes / 16);
    const int blocks = static_cast<int>(std::min<int64_t>(kMaxBlocks, (vecs + kThreads - 1) / kThreads));
    auto* v = static_cast<uint4*>(x.data);
    auto s = static_cast<cudaStream_t>(stream.handle());
    switch (x.dtype) {
      case DType::kBF16: one_shot_all_reduce<__nv_bfloat16><<<blocks, kThreads, 0, s>>>(v, v, peers_, rank_, size_, vecs); break;
      case DType::kF16: one_shot_all_reduce<__half><<<blocks, kThreads, 0, s>>>(v, v, peers_, rank_, size_, vecs); break;
      case DType::kF32: one_shot_all_reduce<float><<<blocks, kThreads, 0, s>>>(v, v, peers_, rank_, size_, vecs); break;
      default: nccl_->all_reduce_sum(x, stream); return;
    }
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
  char* base_ = nullptr;
  std::vector<char*> opened_;
  Peers peers_{};
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
