// The CUDA runtime behind kernels/device_runtime.hpp.
#include <cuda_runtime.h>

#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"

#define AERIE_CUDA_CHECK(expr)                                                                \
  do {                                                                                        \
    cudaError_t aerie_err_ = (expr);                                                          \
    AERIE_CHECK(aerie_err_ == cudaSuccess, #expr << ": " << cudaGetErrorString(aerie_err_));  \
  } while (0)

namespace aerie::cuda_runtime {

namespace {
cudaStream_t S(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace

bool available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the "no device" error
    return false;
  }
  return n > 0;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void set_device(int device) { AERIE_CUDA_CHECK(cudaSetDevice(device)); }
int current_device() {
  int d = 0;
  AERIE_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

int sm_count() {
  int dev = 0, n = 0;
  AERIE_CUDA_CHECK(cudaGetDevice(&dev));
  AERIE_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

void memory_info(size_t* free_bytes, size_t* total_bytes) { AERIE_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes)); }

void* malloc_device(size_t bytes) {
  void* p = nullptr;
  AERIE_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void free_device(void* p) { cudaFree(p); }
void* malloc_host_pinned(size_t bytes) {
  void* p = nullptr;
  AERIE_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}
void free_host_pinned(void* p) { cudaFreeHost(p); }
void memset_device(void* p, int value, size_t bytes) { AERIE_CUDA_CHECK(cudaMemset(p, value, bytes)); }
void memset_async(void* p, int value, size_t bytes, void* stream) { AERIE_CUDA_CHECK(cudaMemsetAsync(p, value, bytes, S(stream))); }
// cudaMemcpy from pageable memory may return before its DMA has landed; the legacy stream's
// sync waits for it, so work on any stream (Aerie's are non-blocking) reads the new bytes.
void copy_host_to_device(void* dst, const void* src, size_t bytes) {
  AERIE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  AERIE_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}
void copy_device_to_host(void* dst, const void* src, size_t bytes) { AERIE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost)); }
void copy_device_to_device(void* dst, const void* src, size_t bytes) {
  AERIE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
void copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  AERIE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, S(stream)));
}
void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, void* stream) {
  AERIE_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault, S(stream)));
}
void* create_stream() {
  cudaStream_t s = nullptr;
  AERIE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}
void destroy_stream(void* stream) { cudaStreamDestroy(S(stream)); }
void synchronize(void* stream) { AERIE_CUDA_CHECK(cudaStreamSynchronize(S(stream))); }
void device_synchronize() { AERIE_CUDA_CHECK(cudaDeviceSynchronize()); }

void begin_capture(void* stream) { AERIE_CUDA_CHECK(cudaStreamBeginCapture(S(stream), cudaStreamCaptureModeThreadLocal)); }
void* end_capture(void* stream) {
  cudaGraph_t graph = nullptr;
  AERIE_CUDA_CHECK(cudaStreamEndCapture(S(stream), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  AERIE_CHECK(e == cudaSuccess, "cudaGraphInstantiate: " << cudaGetErrorString(e));
  return exec;
}
void launch_graph(void* exec, void* stream) { AERIE_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), S(stream))); }
void destroy_graph(void* exec) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)); }

void* create_event() {
  cudaEvent_t e = nullptr;
  AERIE_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}
void destroy_event(void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
void record_event(void* e, void* stream) { AERIE_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e), S(stream))); }
void event_synchronize(void* e) { AERIE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e))); }
void stream_wait_event(void* stream, void* e) {
  AERIE_CUDA_CHECK(cudaStreamWaitEvent(S(stream), static_cast<cudaEvent_t>(e), 0));
}
bool event_done(void* e) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(e));
  if (status == cudaErrorNotReady) return false;
  AERIE_CUDA_CHECK(status);
  return true;
}
float elapsed_ms(void* start, void* end) {
  AERIE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(end)));
  float ms = 0.0f;
  AERIE_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms;
}

}  // namespace aerie::cuda_runtime
