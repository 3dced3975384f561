// Built only without CUDA: every CUDA entry point reports that this build has no CUDA.
#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"

namespace aerie::cuda_runtime {

namespace {
[[noreturn]] void no_cuda() { AERIE_FAIL("this build of Aerie has no CUDA backend (AERIE_WITH_CUDA=OFF)"); }
}  // namespace

bool available() { return false; }
int device_count() { return 0; }
void set_device(int) { no_cuda(); }
int current_device() { no_cuda(); }
int sm_count() { no_cuda(); }
void memory_info(size_t*, size_t*) { no_cuda(); }
void* malloc_device(size_t) { no_cuda(); }
void free_device(void*) {}
void* malloc_host_pinned(size_t) { no_cuda(); }
void free_host_pinned(void*) {}
void memset_device(void*, int, size_t) { no_cuda(); }
void memset_async(void*, int, size_t, void*) { no_cuda(); }
void copy_host_to_device(void*, const void*, size_t) { no_cuda(); }
void copy_device_to_host(void*, const void*, size_t) { no_cuda(); }
void copy_device_to_device(void*, const void*, size_t) { no_cuda(); }
void copy_async(void*, const void*, size_t, void*) { no_cuda(); }
void copy_2d_async(void*, size_t, const void*, size_t, size_t, size_t, void*) { no_cuda(); }
void* create_stream() { no_cuda(); }
void destroy_stream(void*) {}
void synchronize(void*) { no_cuda(); }
void device_synchronize() { no_cuda(); }
void begin_capture(void*) { no_cuda(); }
void* end_capture(void*) { no_cuda(); }
void launch_graph(void*, void*) { no_cuda(); }
void destroy_graph(void*) {}
void* create_event() { no_cuda(); }
void destroy_event(void*) {}
void record_event(void*, void*) { no_cuda(); }
void event_synchronize(void*) { no_cuda(); }
bool event_done(void*) { no_cuda(); }
void stream_wait_event(void*, void*) { no_cuda(); }
float elapsed_ms(void*, void*) { no_cuda(); }

}  // namespace aerie::cuda_runtime
