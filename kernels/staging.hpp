#pragma once
// Host memory for uploads: page-locked on CUDA builds running on a GPU (so copies are
// asynchronous and capture-safe), plain aligned memory for the CPU backend.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"

namespace aerie {

class HostStaging {
 public:
  HostStaging() = default;
  HostStaging(Device device, size_t bytes);
  ~HostStaging();
  HostStaging(HostStaging&& o) noexcept;
  HostStaging& operator=(HostStaging&& o) noexcept;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  template <class T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool pinned_ = false;
};

// A mark in a stream's work: the host can ask whether, or wait until, everything enqueued
// before the last record() has run. CPU streams run work as it is enqueued: always done.
class StreamEvent {
 public:
  explicit StreamEvent(Device device);
  ~StreamEvent();
  StreamEvent(StreamEvent&& o) noexcept;
  StreamEvent& operator=(StreamEvent&& o) noexcept;
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  void record(const Stream& stream);
  void wait() const;   // returns at once when never recorded
  // `stream`'s work enqueued from now on waits, on the device, for the recorded work (no
  // host wait; nothing when never recorded or on the CPU).
  void wait_in(const Stream& stream) const;
  bool done() const;

 private:
  void* event_ = nullptr;  // CUDA only
  bool recorded_ = false;
};

// Host staging for uploads enqueued while earlier ones may not have run yet (overlap
// scheduling launches batch N + 1 before N is done, so N's copies may still be waiting for
// their turn on the stream): `count` buffers used in turn, each handed out again only after
// the copies enqueued from it last time have run. No wait on the stream as a whole.
class StagingRing {
 public:
  StagingRing() = default;
  StagingRing(Device device, size_t bytes, int count = 3);
  // The next buffer (zeros at first), once the copies from its last use have run.
  void* acquire();
  template <class T>
  T* acquire_as() { return static_cast<T*>(acquire()); }
  // After enqueuing the copies from the buffer acquire() gave: marks when they have run.
  void release(const Stream& stream);
  size_t size() const { return bytes_; }

 private:
  std::vector<HostStaging> buffers_;
  std::vector<StreamEvent> copied_;
  size_t bytes_ = 0;
  size_t next_ = 0;  // the buffer acquire() hands out next
};

// Copies bytes between host and device memory in stream order (a plain memcpy for CPU
// streams).
void copy_async(void* dst, const void* src, size_t bytes, const Stream& stream);
// Copies `rows` rows of `row_bytes` bytes whose starts are dst_stride / src_stride bytes
// apart (a column block of a wider matrix), in stream order.
void copy_rows_async(void* dst, size_t dst_stride, const void* src, size_t src_stride, size_t row_bytes, size_t rows,
                     const Stream& stream);
void synchronize(const Stream& stream);
// Sets bytes to zero in stream order.
void zero_async(const TensorView& t, const Stream& stream);

// Copies `values` to the device of `stream` into `buffer` (reallocated when too small, to at
// least min_capacity entries; the caller keeps it, so the next call reuses it) in stream
// order, and returns the [values.size()] i32 view of it. From pageable memory the copy has
// read `values` when it returns, so they may go away.
TensorView upload_ints(Buffer& buffer, std::span<const int32_t> values, const Stream& stream, int64_t min_capacity = 64);

// A stream this object owns: a created CUDA stream (capturable), or the CPU stream.
class OwnedStream {
 public:
  explicit OwnedStream(Device device);
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  const Stream& get() const { return stream_; }

 private:
  Stream stream_;
};

// SideCopyStream: copies into and out of the buffers a graph runner's work reads, on a stream of
// their own, so that they run while the work enqueued before that runner still runs, instead of
// each taking a turn on the main stream between two graphs (on the H200 every small copy or kernel
// there costs the device several microseconds between graphs; docs/performance.md). mark()
// goes after the main stream's work the copies must follow (its last enqueued read of the
// buffers copied into, the write of those copied out); begin() makes the side stream wait for
// it before anything is copied; end() makes the main stream wait for
// every copy enqueued on the side so far (so the next runs, and anything that overwrites a buffer
// being copied out, follow them). On the CPU, and with AERIE_SIDE_COPIES=0 (for measuring), the
// side stream is the main stream and the marks do nothing.
class SideCopyStream {
 public:
  explicit SideCopyStream(const Stream& main);
  // The stream to copy on, once the main stream's work up to the last mark() has run.
  const Stream& begin();
  // The main stream's later work waits for the copies enqueued on the side so far.
  void end();
  // After the main stream's work the next copies must follow (a graph that reads the buffers
  // copied into, or writes those copied out).
  void mark();
  bool separate() const { return side_ != nullptr; }

 private:
  Stream main_;
  std::unique_ptr<OwnedStream> side_;
  StreamEvent read_, copied_;
};

// ReadBackBeside: a small device result (a verify's argmax) copied to pinned host memory on a
// SideCopyStream once the main stream's work up to mark() has run, so the work enqueued after
// that mark (the draft extend behind the verify) is not waited for: copy() after mark(), then
// wait() for that copy alone. The staging grows to the largest copy.
class ReadBackBeside {
 public:
  explicit ReadBackBeside(const Stream& main);
  // After the main stream's work that writes what is read back.
  void mark() { side_.mark(); }
  void copy(const void* src, size_t bytes);
  // The host copy, once copy()'s copy has run.
  template <class T>
  const T* wait() const {
    copied_.wait();
    return host_.as<const T>();
  }

 private:
  Device device_;
  SideCopyStream side_;
  StreamEvent copied_;
  HostStaging host_;
};

}  // namespace aerie
