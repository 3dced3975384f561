// Communicators and layouts within one process: the group of one, the host communicator
// over a group of one, rank layouts of TP x DP, and check_on_every_rank. Across processes:
// tp_parity_main.cpp and mpi_group_main.cpp under mpirun.
#include <gtest/gtest.h>

#include "kernels/buffer.hpp"
#include "kernels/error.hpp"
#include "parallel/communicator.hpp"
#include "parallel/parallel_layout.hpp"

using namespace aerie;

TEST(Communicator, AGroupOfOneLeavesTensorsAsTheyAre) {
  auto world = parallel::make_single_process_group();
  std::vector<std::unique_ptr<parallel::Communicator>> all;
  all.push_back(parallel::make_single_communicator());
  all.push_back(parallel::make_host_communicator(*world));
  all.push_back(parallel::make_communicator(*world, Device::kCpu));
  for (auto& c : all) {
    EXPECT_EQ(c->size(), 1);
    EXPECT_EQ(c->rank(), 0);
    Buffer x(Device::kCpu, DType::kF32, {3}), y(Device::kCpu, DType::kF32, {3});
    const float v[3] = {1.5f, -2.0f, 7.0f};
    x.copy_from_host(v, 12);
    c->all_reduce_sum(x.view(), Stream::cpu());
    c->all_gather(x.view(), y.view(), Stream::cpu());
    c->broadcast(y.view(), 0, Stream::cpu());
    float got[3];
    y.copy_to_host(got, 12);
    EXPECT_EQ(got[0], 1.5f);
    EXPECT_EQ(got[1], -2.0f);
    EXPECT_EQ(got[2], 7.0f);
  }
}

TEST(Communicator, HostCommunicatorRefusesWrongShapesAndDevices) {
  auto world = parallel::make_single_process_group();
  auto c = parallel::make_host_communicator(*world);
  Buffer x(Device::kCpu, DType::kF32, {3}), y(Device::kCpu, DType::kF32, {4}), ids(Device::kCpu, DType::kI32, {3});
  EXPECT_THROW(c->all_gather(x.view(), y.view(), Stream::cpu()), Error);
  EXPECT_THROW(c->all_reduce_sum(ids.view(), Stream::cpu()), Error);
  EXPECT_THROW(c->broadcast(x.view(), 1, Stream::cpu()), Error);
}

TEST(Communicator, NcclWithoutAGpuIsAClearError) {
  if (parallel::nccl_available()) GTEST_SKIP() << "this build has NCCL";
  auto world = parallel::make_single_process_group();
  EXPECT_THROW(parallel::make_nccl_communicator(*world, std::chrono::seconds(1)), Error);
}

TEST(ParallelLayout, RanksSplitIntoTpGroupsThenReplicas) {
  const parallel::ParallelLayout l{.tp_size = 2, .dp_size = 3};
  EXPECT_EQ(l.world_size(), 6);
  EXPECT_EQ(l.tp_rank(5), 1);
  EXPECT_EQ(l.dp_rank(5), 2);
  EXPECT_EQ(l.group_leader(2), 4);
  EXPECT_EQ(l.attn_tp_size(), 2);
  const parallel::ParallelLayout dpa{.tp_size = 4, .dp_size = 2, .dp_attention = true};
  EXPECT_EQ(dpa.attn_tp_size(), 2);
}

TEST(ParallelLayout, DpAttentionSplitsTheTpRanksIntoAttentionGroups) {
  const parallel::ParallelLayout l{.tp_size = 4, .dp_size = 2, .dp_attention = true};
  EXPECT_EQ(l.world_size(), 4);  // sglang: --tp 4 --dp 2 --enable-dp-attention runs on 4 GPUs
  EXPECT_EQ(l.group_size(), 2);
  EXPECT_EQ(l.tp_rank(3), 3);  // the MLP spans every rank
  EXPECT_EQ(l.dp_rank(3), 1);
  EXPECT_EQ(l.attn_tp_rank(3), 1);
  EXPECT_EQ(l.group_leader(1), 2);
  const parallel::ParallelLayout four{.tp_size = 4, .dp_size = 4, .dp_attention = true};
  EXPECT_EQ(four.group_size(), 1);
  EXPECT_EQ(four.dp_rank(2), 2);
  EXPECT_NO_THROW(l.check(4));
  try {
    l.check(8);
    FAIL() << "accepted 8 ranks for DP attention over tp 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np 4"), std::string::npos) << e.what();
  }
}

TEST(ParallelLayout, AWrongRankCountSaysHowToLaunch) {
  try {
    parallel::ParallelLayout{.tp_size = 2, .dp_size = 2}.check(2);
    FAIL() << "accepted 2 ranks for tp 2 x dp 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW((parallel::ParallelLayout{.tp_size = 3, .dp_size = 2, .dp_attention = true}.check(6)), Error);
  EXPECT_NO_THROW((parallel::ParallelLayout{.tp_size = 2, .dp_size = 2}.check(4)));
}

TEST(ParallelLayout, GroupsOfOneProcess) {
  auto world = parallel::make_single_process_group();
  auto g = parallel::make_parallel_groups(*world, {});
  EXPECT_EQ(g.tp->size(), 1);
  EXPECT_EQ(g.dp->size(), 1);
  EXPECT_EQ(g.attn_tp->size(), 1);
}

TEST(CheckOnEveryRank, PassesTheErrorOn) {
  auto world = parallel::make_single_process_group();
  EXPECT_NO_THROW(parallel::check_on_every_rank(*world, [] {}));
  try {
    parallel::check_on_every_rank(*world, [] { AERIE_FAIL("no GPU here"); });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU here"), std::string::npos);
  }
}
