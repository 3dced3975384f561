// CUDA runtime entry points behind kernels/device_memory.hpp.
#include <cuda_runtime.h>

#include "kernels/device_memory.hpp"
#include "kernels/error.hpp"

#define AERIE_CUDA_CHECK(expr)                                                   \
  do {                                                                           \
    cudaError_t aerie_err_ = (expr);                                             \
    AERIE_CHECK(aerie_err_ == cudaSuccess, #expr << ": " << cudaGetErrorString(aerie_err_)); \
  } while (0)

namespace aerie::cuda_runtime {

bool available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return n > 0;
}

void* malloc_device(size_t bytes) {
  void* p = nullptr;
  AERIE_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void free_device(void* p) { cudaFree(p); }
void memset_device(void* p, int value, size_t bytes) { AERIE_CUDA_CHECK(cudaMemset(p, value, bytes)); }
void copy_host_to_device(void* dst, const void* src, size_t bytes) {
  AERIE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_device_to_host(void* dst, const void* src, size_t bytes) {
  AERIE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace aerie::cuda_runtime
