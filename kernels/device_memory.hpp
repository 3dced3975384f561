#pragma once
// Host-side entry points of the CUDA runtime that Buffer needs. Implemented in
// cuda/device_memory.cu when CUDA is built, in device_memory_stub.cpp otherwise (where
// they report that CUDA is unavailable).
#include <cstddef>

namespace aerie::cuda_runtime {

bool available();
void* malloc_device(size_t bytes);
void free_device(void* p);
void memset_device(void* p, int value, size_t bytes);
void copy_host_to_device(void* dst, const void* src, size_t bytes);
void copy_device_to_host(void* dst, const void* src, size_t bytes);

}  // namespace aerie::cuda_runtime
