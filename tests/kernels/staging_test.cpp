// upload_ints: the staging helper that ships index lists (gather rows, KV moves) to a
// device buffer the caller keeps.
#include <gtest/gtest.h>

#include <vector>

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
