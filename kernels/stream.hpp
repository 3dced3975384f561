#pragma once
// Stream: where a kernel runs. CPU streams execute synchronously on the calling thread;
// a CUDA stream carries its cudaStream_t as an opaque handle so host headers stay CUDA-free.
#include "kernels/tensor.hpp"

namespace aerie {

class Stream {
 public:
  static Stream cpu() { return Stream(Device::kCpu, nullptr); }
  static Stream cuda(void* cuda_stream) { return Stream(Device::kCuda, cuda_stream); }
  Device device() const { return device_; }
  void* handle() const { return handle_; }  // cudaStream_t for CUDA, null for CPU

 private:
  Stream(Device d, void* h) : device_(d), handle_(h) {}
  Device device_;
  void* handle_;
};

}  // namespace aerie
