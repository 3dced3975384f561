#pragma once
// An actor system with Aerie's message types registered, for actor tests.
#include <caf/all.hpp>
#include <memory>
#include <utility>
#include <vector>

#include "actors/messages.hpp"

namespace aerie::testing {

struct ActorTestSystem {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  // Actors told to exit when the system goes: the system waits for every actor, and a
  // blocking actor (the DraftWorker) never stops on its own, so a test that fails half-way
  // still ends.
  std::vector<caf::actor> stop_at_end;
  ActorTestSystem() {
    actors::register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  ~ActorTestSystem() {
    for (auto& a : stop_at_end) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  template <class... Ts>
  caf::actor spawn_stopped_at_end(Ts&&... xs) {
    caf::actor a = sys->spawn(std::forward<Ts>(xs)...);
    stop_at_end.push_back(a);
    return a;
  }
};

}  // namespace aerie::testing
