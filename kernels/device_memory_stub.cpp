// Built only without CUDA: every CUDA entry point reports that this build has no CUDA.
#include "kernels/device_memory.hpp"
#include "kernels/error.hpp"

namespace aerie::cuda_runtime {

namespace {
[[noreturn]] void no_cuda() { AERIE_FAIL("this build of Aerie has no CUDA backend (AERIE_WITH_CUDA=OFF)"); }
}  // namespace

bool available() { return false; }
void* malloc_device(size_t) { no_cuda(); }
void free_device(void*) {}
void memset_device(void*, int, size_t) { no_cuda(); }
void copy_host_to_device(void*, const void*, size_t) { no_cuda(); }
void copy_device_to_host(void*, const void*, size_t) { no_cuda(); }

}  // namespace aerie::cuda_runtime
