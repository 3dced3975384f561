#pragma once
// Host-side facade of the CUDA runtime: memory, streams, events, CUDA graphs. Implemented
// in cuda/device_runtime.cu when CUDA is built, in device_runtime_unavailable.cpp otherwise (where
// every call reports that this build has no CUDA). Host header: no CUDA includes; handles
// are opaque pointers.
#include <cstddef>

namespace aerie::cuda_runtime {

bool available();
int device_count();
void set_device(int device);  // this thread's (and, first, this process's) current device
int current_device();
int sm_count();                      // multiprocessors of the current device
void memory_info(size_t* free_bytes, size_t* total_bytes);  // of the current device
void* malloc_device(size_t bytes);
void free_device(void* p);
void* malloc_host_pinned(size_t bytes);
void free_host_pinned(void* p);
void memset_device(void* p, int value, size_t bytes);
void memset_async(void* p, int value, size_t bytes, void* stream);
void copy_host_to_device(void* dst, const void* src, size_t bytes);
void copy_device_to_host(void* dst, const void* src, size_t bytes);
void copy_device_to_device(void* dst, const void* src, size_t bytes);
void copy_async(void* dst, const void* src, size_t bytes, void* stream);  // any direction
// `height` rows of `width` bytes, rows `dpitch` / `spitch` bytes apart (any direction).
void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, void* stream);
void* create_stream();               // a non-blocking stream (capturable)
void destroy_stream(void* stream);
void synchronize(void* stream);
void device_synchronize();

// CUDA graphs: capture everything enqueued on `stream` between the two calls.
void begin_capture(void* stream);
void* end_capture(void* stream);     // an instantiated executable graph
void launch_graph(void* graph_exec, void* stream);
void destroy_graph(void* graph_exec);

// Events, for timing with the device clock.
void* create_event();
void destroy_event(void* event);
void record_event(void* event, void* stream);
float elapsed_ms(void* start, void* end);  // synchronizes on `end`
void event_synchronize(void* event);      // the host waits until the work before the record is done
bool event_done(void* event);             // that work is done (no wait)
void stream_wait_event(void* stream, void* event);  // `stream`'s later work waits, on the device, for the work before the record

}  // namespace aerie::cuda_runtime
