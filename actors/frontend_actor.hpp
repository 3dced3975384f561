#pragma once
// The frontend hook: turns client requests into SubmitRequests for the Router and the
// replies into whatever the client protocol writes. Today's protocol is JSON lines
// (aerie-serve reads them on stdin and writes one result line per request, in completion
// order); the HTTP API plugs in the same way.
#include <caf/all.hpp>
#include <functional>
#include <string>

#include "actors/messages.hpp"

namespace aerie::actors {

// A client request as the frontend received it: its text, and where its answer goes.
struct ClientLine {
  std::string text;
};
struct DrainRequest {};  // answered with true once no request is in progress

struct FrontendState {
  caf::actor router;
  // Parses a line into (client id, request) or throws with a message for the client.
  std::function<std::pair<std::string, core::GenerationRequest>(const std::string&)> parse;
  std::function<void(const std::string&)> write;  // one output line (thread-safe)
  uint64_t next_rid = 0;
  int64_t in_progress = 0;
  std::vector<caf::response_promise> drains;
  static inline const char* name = "aerie.frontend";
};

caf::behavior frontend_actor(caf::stateful_actor<FrontendState>* self, caf::actor router,
                             std::function<std::pair<std::string, core::GenerationRequest>(const std::string&)> parse,
                             std::function<void(const std::string&)> write);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ClientLine& x) {
  return f(caf::meta::type_name("ClientLine"), x.text);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DrainRequest&) {
  return f(caf::meta::type_name("DrainRequest"));
}

}  // namespace aerie::actors
