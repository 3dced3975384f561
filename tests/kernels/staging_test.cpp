// upload_ints: the staging helper that ships index lists (gather rows, KV moves) to a
// device buffer the caller keeps.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/error.hpp"
#include "kernels/staging.hpp"

using namespace aerie;

TEST(UploadInts, CopiesIntoTheBufferGrowingItOnlyWhenTooSmall) {
  const Stream cpu = Stream::cpu();
  Buffer buf;
  const std::vector<int32_t> a = {3, 1, 4};
  const TensorView va = upload_ints(buf, a, cpu, 8);
  ASSERT_EQ(va.numel(), 3);
  EXPECT_EQ(buf.view().numel(), 8);  // min capacity
  EXPECT_EQ(std::vector<int32_t>(va.ptr<int32_t>(), va.ptr<int32_t>() + 3), a);
  void* first = buf.data();
  const std::vector<int32_t> b = {9, 8, 7, 6, 5, 4, 3, 2};
  const TensorView vb = upload_ints(buf, b, cpu, 8);
  EXPECT_EQ(buf.data(), first);  // fits: the same buffer
  EXPECT_EQ(std::vector<int32_t>(vb.ptr<int32_t>(), vb.ptr<int32_t>() + 8), b);
  std::vector<int32_t> c(20);
  for (int i = 0; i < 20; ++i) c[static_cast<size_t>(i)] = i * i;
  const TensorView vc = upload_ints(buf, c, cpu, 8);
  EXPECT_EQ(buf.view().numel(), 20);  // grown to what is needed
  EXPECT_EQ(std::vector<int32_t>(vc.ptr<int32_t>(), vc.ptr<int32_t>() + 20), c);
  EXPECT_EQ(upload_ints(buf, std::vector<int32_t>{}, cpu).numel(), 0);
}

// StagingRing hands its buffers out in turn (zeros at first), so an upload enqueued while
// the previous one has not run yet never writes over the host memory that copy reads. On the
// CPU stream every copy has run when it returns, so acquire() never waits.
TEST(StagingRing, HandsOutItsBuffersInTurnZeroedAtFirst) {
  const Stream cpu = Stream::cpu();
  StagingRing ring(Device::kCpu, 16, 3);
  EXPECT_EQ(ring.size(), 16u);
  std::vector<void*> seen;
  for (int i = 0; i < 6; ++i) {
    auto* p = ring.acquire_as<int32_t>();
    if (i < 3) {
      EXPECT_EQ(p[0] + p[1] + p[2] + p[3], 0);  // zeros before first use
    }
    p[0] = i;
    seen.push_back(p);
    ring.release(cpu);
  }
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_NE(seen[1], seen[2]);
  EXPECT_NE(seen[0], seen[2]);
  EXPECT_EQ(seen[3], seen[0]);  // the ring comes round
  EXPECT_EQ(static_cast<int32_t*>(seen[5])[0], 5);
  EXPECT_THROW(StagingRing(Device::kCpu, 16, 0), Error);
}

// A CPU stream's work has run when it is enqueued: its events are always done.
TEST(StreamEvent, OnTheCpuIsDoneAtOnce) {
  StreamEvent e(Device::kCpu);
  EXPECT_TRUE(e.done());
  e.record(Stream::cpu());
  EXPECT_TRUE(e.done());
  e.wait();
}

// On the CPU a SideCopyStream has no stream of its own: begin() is the main stream, whose copies
// run at once, and mark() / end() have nothing to order. (The CUDA ordering is
// CudaOps.SideCopiesFollowTheMarkedWorkAndPrecedeTheMainStreamsNext.)
TEST(SideCopyStream, OnTheCpuCopiesOnTheMainStream) {
  SideCopyStream side(Stream::cpu());
  EXPECT_FALSE(side.separate());
  side.mark();
  const Stream& s = side.begin();
  EXPECT_EQ(s.device(), Device::kCpu);
  std::vector<int32_t> from = {1, 2, 3}, to(3, 0);
  copy_async(to.data(), from.data(), 3 * sizeof(int32_t), s);
  side.end();
  EXPECT_EQ(to, from);
}

// A read back gives each copy's bytes, its staging growing to a larger copy.
TEST(ReadBackBeside, GivesEachCopyAndGrowsForALargerOne) {
  ReadBackBeside back(Stream::cpu());
  const std::vector<int32_t> small = {7, 8}, large = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  back.mark();
  back.copy(small.data(), small.size() * sizeof(int32_t));
  EXPECT_EQ(std::vector<int32_t>(back.wait<int32_t>(), back.wait<int32_t>() + small.size()), small);
  back.mark();
  back.copy(large.data(), large.size() * sizeof(int32_t));
  EXPECT_EQ(std::vector<int32_t>(back.wait<int32_t>(), back.wait<int32_t>() + large.size()), large);
}
