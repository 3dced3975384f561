#include "actors/frontend_actor.hpp"

#include <nlohmann/json.hpp>

#include "kernels/error.hpp"

namespace aerie::actors {

namespace {

// One reply line. Text from the client (echoed in an error) need not be valid UTF-8: what is
// not is replaced (U+FFFD) rather than failing the dump and, with it, this actor.
std::string line_of(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void maybe_drained(caf::stateful_actor<FrontendState>* self) {
  if (self->state.in_progress != 0) return;
  for (auto& p : self->state.drains) p.deliver(true);
  self->state.drains.clear();
}

}  // namespace

caf::behavior frontend_actor(caf::stateful_actor<FrontendState>* self, caf::actor router,
                             std::function<std::pair<std::string, core::GenerationRequest>(const std::string&)> parse,
                             std::function<void(const std::string&)> write) {
  self->state.router = std::move(router);
  self->state.parse = std::move(parse);
  self->state.write = std::move(write);
  return {
      [self](ClientLine& line) {
        auto& st = self->state;
        std::pair<std::string, core::GenerationRequest> parsed;
        try {
          parsed = st.parse(line.text);
        } catch (const std::exception& e) {
          st.write(line_of(nlohmann::json{{"error", {{"code", "invalid_request"}, {"message", ::aerie::client_message(e)}}}}));
          return;
        }
        const uint64_t rid = st.next_rid++;
        const std::string client_id = parsed.first.empty() ? std::to_string(rid) : parsed.first;
        ++st.in_progress;
        self->request(st.router, caf::infinite, SubmitRequest{rid, std::move(parsed.second)})
            .then(
                [self, client_id](RequestDone& d) {
                  nlohmann::json j{{"rid", client_id}};
                  if (!d.error.empty()) {
                    j["error"] = {{"code", "rejected"}, {"message", d.error}};
                  } else {
                    j["output_ids"] = d.result.output_ids;
                    // The shape of HTTP /generate's meta_info (launch/serving/response_writer.cpp):
                    // finish_reason is sglang's object, with the matched stop id or the length.
                    nlohmann::json finish{{"type", d.result.finish_reason}};
                    if (d.result.finish_reason == "stop" && !d.result.output_ids.empty()) finish["matched"] = d.result.output_ids.back();
                    if (d.result.finish_reason == "length") finish["length"] = d.result.output_ids.size();
                    j["meta_info"] = {{"id", client_id},
                                      {"finish_reason", finish},
                                      {"prompt_tokens", d.result.prompt_tokens},
                                      {"completion_tokens", d.result.output_ids.size()},
                                      {"cached_tokens", d.result.cached_tokens},
                                      {"spec_verify_ct", d.result.spec_verify_ct}};
                  }
                  self->state.write(line_of(j));
                  --self->state.in_progress;
                  maybe_drained(self);
                },
                [self, client_id](caf::error& e) {
                  self->state.write(line_of(nlohmann::json{{"rid", client_id}, {"error", {{"code", "internal"}, {"message", self->system().render(e)}}}}));
                  --self->state.in_progress;
                  maybe_drained(self);
                });
      },
      [self](DrainRequest) -> caf::result<bool> {
        if (self->state.in_progress == 0) return true;
        auto p = self->make_response_promise();
        self->state.drains.push_back(p);
        return caf::delegated<bool>{};
      },
  };
}

}  // namespace aerie::actors
