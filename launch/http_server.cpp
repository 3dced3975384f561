#include "launch/http_server.hpp"

#include <httplib.h>

#include <caf/all.hpp>
#include <chrono>
#include <optional>
#include <nlohmann/json.hpp>

#include "actors/messages.hpp"
#include "kernels/error.hpp"
#include "launch/json_request.hpp"
#include "model/bpe_tokenizer.hpp"

namespace aerie::launch {

namespace {

using nlohmann::json;

std::string error_body(const std::string& code, const std::string& message) {
  return json{{"error", {{"code", code}, {"message", message}}}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

HttpServer::HttpServer(Deployment& deployment, model::LlamaConfig config, std::unique_ptr<model::TextTokenizer> tokenizer,
                       DeploymentOptions deployment_options, HttpOptions options)
    : deployment_(deployment),
      config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      deployment_options_(std::move(deployment_options)),
      options_(std::move(options)),
      server_(std::make_unique<httplib::Server>()) {
  auto& s = *server_;
  // cpp-httplib's default pool is max(8, cores - 1) threads: far too few for requests
  // that wait on the engine. Each handler only blocks on its own reply.
  const int threads = options_.handler_threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(options_.max_body_bytes);
  auto send = [](httplib::Response& res, const Reply& r) { res.status = r.status, res.set_content(r.body, "application/json"); };
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
  s.Get("/health_generate", [this, send](const httplib::Request&, httplib::Response& res) { send(res, health_generate()); });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"object", "list"}, {"data", {{{"id", options_.model_name}, {"object", "model"}, {"owned_by", "aerie"},
                                                        {"max_model_len", config_.max_position_embeddings}}}}}
                        .dump(),
                    "application/json");
  });
  s.Get("/get_server_info", [this](const httplib::Request&, httplib::Response& res) {
    const auto& d = deployment_options_;
    res.set_content(json{{"model_path", d.model_path}, {"load_format", d.load_format}, {"device", d.device}, {"dtype", d.dtype},
                         {"tp_size", d.tp_size}, {"dp_size", d.dp_size}, {"max_running_requests", d.max_running_requests},
                         {"max_total_tokens", d.max_total_tokens}, {"chunked_prefill_size", d.chunked_prefill_size},
                         {"page_size", d.page_size}, {"context_length", config_.max_position_embeddings},
                         {"vocab_size", config_.vocab_size}}
                        .dump(),
                    "application/json");
  });
  s.Post("/abort_request", [this](const httplib::Request& req, httplib::Response& res) {
    json j;
    try {
      j = json::parse(req.body);
    } catch (const json::exception&) {
      res.status = 400;
      return res.set_content(error_body("invalid_json", "malformed JSON"), "application/json");
    }
    if (!j.is_object() || !j.contains("rid") || !(j["rid"].is_string() || j["rid"].is_number_integer())) {
      res.status = 400;
      return res.set_content(error_body("invalid_request", "'rid' (string or integer) is required"), "application/json");
    }
    const std::string rid = j["rid"].is_string() ? j["rid"].get<std::string>() : std::to_string(j["rid"].get<int64_t>());
    std::optional<uint64_t> engine_rid;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      if (auto it = live_.find(rid); it != live_.end()) engine_rid = it->second;
    }
    if (!engine_rid) {
      res.status = 404;
      return res.set_content(error_body("not_found", "no request '" + rid + "' in progress"), "application/json");
    }
    caf::anon_send(deployment_.router(), actors::AbortRequest{*engine_rid});
    res.set_content("{}", "application/json");
  });
  s.Post("/generate", [this, send](const httplib::Request& req, httplib::Response& res) {
    bool stream = false;
    auto parsed = parse(req.body, &stream);
    if (auto* r = std::get_if<Reply>(&parsed)) return send(res, *r);
    if (!stream) return send(res, run(std::get<ParsedRequest>(std::move(parsed))));
    stream_generate(std::get<ParsedRequest>(std::move(parsed)), res);
  });
  // cpp-httplib answers an oversized body with 413 itself; make every other failure JSON too.
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty())
      res.set_content(error_body(res.status == 413 ? "payload_too_large" : res.status == 404 ? "not_found" : "http_error",
                                 "HTTP " + std::to_string(res.status)),
                      "application/json");
  });
}

HttpServer::~HttpServer() = default;

std::variant<ParsedRequest, HttpServer::Reply> HttpServer::parse(const std::string& body, bool* stream) const {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    return Reply{400, error_body("invalid_json", std::string("malformed JSON: ") + e.what())};
  }
  ParsedRequest p;
  try {
    AERIE_CHECK(j.is_object(), "the request must be a JSON object");
    if (j.contains("stream")) AERIE_CHECK(j["stream"].is_boolean(), "'stream' must be true or false");
    *stream = j.value("stream", false);
    if (j.contains("text")) {
      AERIE_CHECK(!j.contains("input_ids"), "give 'text' or 'input_ids', not both");
      AERIE_CHECK(j["text"].is_string(), "'text' must be a string");
      AERIE_CHECK(tokenizer_, "'text' needs a tokenizer; this model folder has none, send 'input_ids'");
      const std::string text = j["text"].get<std::string>();
      AERIE_CHECK(!text.empty(), "'text' is empty");
      j["input_ids"] = tokenizer_->encode(text);
      j.erase("text");
    }
    p = parse_generate_request(j, config_.vocab_size);
  } catch (const std::exception& e) {
    return Reply{400, error_body("invalid_request", e.what())};
  }
  return p;
}

HttpServer::Reply HttpServer::run(ParsedRequest p) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t rid = next_rid_++;
  const std::string id = p.rid.empty() ? std::to_string(rid) : p.rid;
  track(id, rid);
  actors::RequestDone done;
  bool replied = false;
  {
    caf::scoped_actor self{deployment_.system()};
    self->request(deployment_.router(), caf::infinite, actors::SubmitRequest{rid, p.request})
        .receive([&](actors::RequestDone& d) { done = std::move(d), replied = true; }, [&](caf::error& e) {
          done.error = deployment_.system().render(e);
        });
  }
  untrack(id);
  if (!replied) return {503, error_body("unavailable", done.error)};
  if (!done.error.empty()) return {400, error_body("rejected", done.error)};
  const double latency = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json out{{"output_ids", done.result.output_ids},
           {"meta_info",
            {{"id", id},
             {"finish_reason", {{"type", done.result.finish_reason}}},
             {"prompt_tokens", done.result.prompt_tokens},
             {"completion_tokens", done.result.output_ids.size()},
             {"e2e_latency", latency}}}};
  if (tokenizer_) out["text"] = tokenizer_->decode(done.result.output_ids);
  return {200, out.dump(-1, ' ', false, json::error_handler_t::replace)};
}

// Server-sent events: one `data: {...}` per iteration that adds tokens (the new ids and the
// text they complete), a final one with meta_info, then `data: [DONE]`. The scoped actor
// that receives the chunks lives in the connection's thread, which also writes them; a
// client that goes away aborts its request, which frees its KV pages.
void HttpServer::stream_generate(ParsedRequest p, httplib::Response& res) {
  struct Stream {
    std::unique_ptr<caf::scoped_actor> self;
    uint64_t rid;
    std::string client_id;
    std::string pending_text;  // decoded bytes that do not finish a UTF-8 character yet
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    bool started = false;
  };
  auto st = std::make_shared<Stream>();
  st->rid = next_rid_++;
  st->client_id = p.rid.empty() ? std::to_string(st->rid) : p.rid;
  auto request = std::make_shared<core::GenerationRequest>(std::move(p.request));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, st, request](size_t, httplib::DataSink& sink) {
    auto write = [&](const json& j) {
      const std::string line = "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
      return sink.write(line.data(), line.size());
    };
    if (!st->started) {  // the first call, in the connection's thread: the actor lives here from now on
      st->started = true;
      st->self = std::make_unique<caf::scoped_actor>(deployment_.system());
      (*st->self)->send(deployment_.router(), actors::SubmitRequest{st->rid, *request, caf::actor_cast<caf::actor>(*st->self)});
    }
    bool done = false, alive = true;
    (*st->self)->receive(
        [&](actors::TokenChunk& c) {
          json j{{"token_ids", c.tokens}, {"meta_info", {{"id", st->client_id}}}};
          if (tokenizer_) {
            st->pending_text += tokenizer_->decode(c.tokens);
            j["text"] = model::take_complete_utf8(st->pending_text);  // never half a character
          }
          alive = write(j);
        },
        [&](actors::RequestDone& d) {
          done = true;
          json j{{"meta_info", {{"id", st->client_id}}}};
          if (!d.error.empty()) {
            j = json{{"error", {{"code", "rejected"}, {"message", d.error}}}};
          } else {
            j["output_ids"] = d.result.output_ids;
            j["meta_info"] = {{"id", st->client_id},
                              {"finish_reason", {{"type", d.result.finish_reason}}},
                              {"prompt_tokens", d.result.prompt_tokens},
                              {"completion_tokens", d.result.output_ids.size()},
                              {"e2e_latency", std::chrono::duration<double>(std::chrono::steady_clock::now() - st->t0).count()}};
          }
          alive = write(j);
          const std::string end = "data: [DONE]\n\n";
          alive = alive && sink.write(end.data(), end.size());
        },
        caf::after(std::chrono::seconds(600)) >> [&] { alive = false; });
    if (!alive && !done) {
      (*st->self)->send(deployment_.router(), actors::AbortRequest{st->rid});  // the client is gone
      return false;
    }
    if (done) sink.done();
    return true;
  });
}

void HttpServer::track(const std::string& client_rid, uint64_t rid) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_[client_rid] = rid;
}

void HttpServer::untrack(const std::string& client_rid) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_.erase(client_rid);
}

HttpServer::Reply HttpServer::health_generate() {
  ParsedRequest probe;
  probe.request.prompt = {config_.bos_token_id >= 0 ? config_.bos_token_id : 0};
  probe.request.max_new_tokens = 1;
  probe.request.sampling.temperature = 0.0f;
  Reply r = run(std::move(probe));
  if (r.status != 200) return {503, error_body("unhealthy", r.body)};
  return {200, "{}"};
}

void HttpServer::listen() {
  AERIE_CHECK(server_->bind_to_port(options_.host.c_str(), options_.port), "cannot listen on " << options_.host << ":" << options_.port);
  bound_port_ = options_.port;
  server_->listen_after_bind();
}

void HttpServer::stop() { server_->stop(); }

}  // namespace aerie::launch
