#pragma once
// The Router: picks a DP group's Scheduler for each request (the one with the fewest
// requests in progress; ties by index) and delegates the request to it, so the client's
// reply comes straight from that Scheduler.
#include <caf/all.hpp>
#include <map>
#include <vector>

#include "actors/messages.hpp"

namespace aerie::actors {

struct RouterState {
  std::vector<caf::actor> schedulers;
  std::vector<int64_t> in_progress;
  std::map<uint64_t, size_t> group_of;  // rid -> scheduler index
  static inline const char* name = "aerie.router";
};

caf::behavior router_actor(caf::stateful_actor<RouterState>* self, std::vector<caf::actor> schedulers);

}  // namespace aerie::actors
