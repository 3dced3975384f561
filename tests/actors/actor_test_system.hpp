#pragma once
// An actor system with Aerie's message types registered, for actor tests.
#include <caf/all.hpp>
#include <memory>

#include "actors/messages.hpp"

namespace aerie::testing {

struct ActorTestSystem {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  ActorTestSystem() {
    actors::register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

}  // namespace aerie::testing
