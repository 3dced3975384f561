#pragma once
// The Router: picks a DP group's Scheduler for each request (the one with the fewest
// requests in progress; ties by index) and delegates the request to it, so the client's
// reply comes straight from that Scheduler. A SubmitGroup's members all go to one Scheduler,
// which admits them together; each member's reply goes to its stream_to.
#include <caf/all.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/engine_fault.hpp"
#include "actors/messages.hpp"

namespace aerie::actors {

struct RouterState {
  std::vector<caf::actor> schedulers;
  std::vector<int64_t> in_progress;
  std::map<uint64_t, size_t> group_of;  // rid -> scheduler index
  std::shared_ptr<core::EngineFault> fault;  // raised when a Scheduler dies (null: none)
  std::optional<std::string> failed;         // EngineFailed came: why
  static inline const char* name = "aerie.router";
};

// EngineFailed goes to every Scheduler (which fail their requests with 503) and makes the
// Router refuse new requests with 503; a Scheduler that dies raises `fault`.
caf::behavior router_actor(caf::stateful_actor<RouterState>* self, std::vector<caf::actor> schedulers,
                           std::shared_ptr<core::EngineFault> fault = nullptr);

}  // namespace aerie::actors
