#include "actors/actor_pool.hpp"

#include <chrono>
#include <cstdlib>

namespace aerie::actors {

void configure_actor_pool(caf::actor_system_config& cfg, Device compute) {
  if (compute != Device::kCpu || std::getenv("AERIE_CAF_POOL_DEFAULTS")) return;  // the latter: for measuring
  // One pool thread: the scheduler and its peers pass a few messages per step; more threads
  // only poll beside the compute threads.
  cfg.set("scheduler.max-threads", size_t{1});
  // Busy polling, then 10 polls 50 us apart (0.5 ms), then every millisecond: a message that
  // finds the pool asleep waits at most 1 ms, against steps of tens of milliseconds.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{10});
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(1)});
}

}  // namespace aerie::actors
