// The actor pool's settings per compute device (actors/actor_pool.hpp): one calm pool thread
// when the model computes on the CPU, CAF's defaults on a GPU, and a system built with the CPU
// settings still delivers messages.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <chrono>

#include "actors/actor_pool.hpp"

using namespace aerie;

TEST(ActorPool, CpuComputeGetsOneCalmPoolThreadAndCudaKeepsCafDefaults) {
  caf::actor_system_config cpu;
  actors::configure_actor_pool(cpu, Device::kCpu);
  EXPECT_EQ(caf::get_or(cpu, "scheduler.max-threads", size_t{0}), 1u);
  EXPECT_EQ(caf::get_or(cpu, "work-stealing.moderate-poll-attempts", size_t{0}), 10u);
  EXPECT_EQ(caf::get_or(cpu, "work-stealing.relaxed-sleep-duration", caf::timespan{0}), caf::timespan{std::chrono::milliseconds(1)});

  caf::actor_system_config cuda;
  const size_t before = caf::get_or(cuda, "scheduler.max-threads", size_t{0});
  actors::configure_actor_pool(cuda, Device::kCuda);
  EXPECT_EQ(caf::get_or(cuda, "scheduler.max-threads", size_t{0}), before);
  EXPECT_EQ(caf::get_or(cuda, "work-stealing.relaxed-sleep-duration", caf::timespan{0}),
            caf::get_or(caf::actor_system_config{}, "work-stealing.relaxed-sleep-duration", caf::timespan{0}));

  caf::actor_system sys{cpu};
  EXPECT_EQ(sys.scheduler().num_workers(), 1u);
  auto doubler = sys.spawn([]() -> caf::behavior { return {[](int x) { return 2 * x; }}; });
  caf::scoped_actor self{sys};
  for (int i = 0; i < 50; ++i) {
    int got = -1;
    self->request(doubler, std::chrono::seconds(10), i).receive([&](int v) { got = v; }, [&](caf::error&) {});
    ASSERT_EQ(got, 2 * i);
  }
}
