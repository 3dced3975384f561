#include "launch/serving/http_server.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/messages.hpp"
#include "kernels/error.hpp"
#include "kernels/log.hpp"
#include "launch/serving/incremental_text.hpp"
#include "launch/serving/request_id.hpp"
#include "launch/serving/request_session.hpp"
#include "launch/serving/response_writer.hpp"

namespace aerie::launch {

namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Codes that name a server-side failure get OpenAI's "server_error" type.
std::string error_body(const std::string& code, const std::string& message) {
  const bool server = code == "engine_error" || code == "unavailable" || code == "unhealthy";
  return dump(json{{"error", {{"code", code}, {"type", server ? "server_error" : "invalid_request_error"}, {"message", message}}}});
}

// The error code of an engine reply's status: 400 the request was rejected, 499 the client
// left, 500 the engine failed it, 503 the engine is down.
std::string error_code(int status) {
  return status == 500 ? "engine_error" : status == 503 ? "unavailable" : status == 499 ? "client_closed" : "rejected";
}

HttpReply json_reply(int status, std::string body) {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpReply error_reply(int status, const std::string& code, const std::string& message) {
  return json_reply(status, error_body(code, message));
}

// A client error found inside a route: route() answers it.
struct HttpError {
  int status;
  std::string code;
  std::string message;
};

// Parses a body as JSON (invalid UTF-8 and NaN are malformed JSON; nesting past
// kMaxJsonDepth is refused while parsing).
json parse_body(const HttpRequest& req) {
  try {
    return parse_client_json(req.body);
  } catch (const std::exception& e) {
    throw HttpError{400, "invalid_json", ::aerie::client_message(e)};
  }
}

// Sample i of a request with n > 1: a request of its own (n = 1) seeded seed + i, wrapping
// within the non-negative seeds. With n = 1 the request itself.
ParsedRequest sample_request(const ParsedRequest& p, int i) {
  ParsedRequest one = p;
  one.n = 1;
  if (p.n > 1)
    one.request.sampling.seed = static_cast<int64_t>((static_cast<uint64_t>(p.request.sampling.seed) + static_cast<uint64_t>(i)) &
                                                     static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  return one;
}

// Labels a streamed chunk of sample i: OpenAI chunks by their choices' index, sglang's by
// an "index" field (as sglang streams n > 1).
void label_sample(json& chunk, ApiKind kind, int i) {
  if (kind == ApiKind::kGenerate) {
    chunk["index"] = i;
    return;
  }
  for (auto& c : chunk["choices"]) c["index"] = i;
}

bool is_usage_chunk(const json& c) { return c.contains("usage") && c["usage"].is_object() && c.contains("choices") && c["choices"].empty(); }

}  // namespace

HttpServer::HttpServer(Deployment& deployment, model::LlamaConfig config, std::unique_ptr<model::TextTokenizer> tokenizer,
                       DeploymentOptions deployment_options, HttpOptions options)
    : deployment_(deployment),
      config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      deployment_options_(std::move(deployment_options)),
      options_(std::move(options)),
      metrics_(options_.model_name, deployment_options_.speculative_algorithm.empty() ? 0 : deployment_options_.speculative_num_steps) {
  if (!deployment_options_.model_path.empty()) sampling_defaults_ = model::load_generation_config(deployment_options_.model_path).sampling;
  if (tokenizer_) {
    auto name_of = [&](int32_t id) { return id >= 0 ? tokenizer_->token_text(id) : std::string(); };
    chat_.emplace(find_chat_template(options_.chat_template, deployment_options_.model_path), *tokenizer_, name_of(config_.bos_token_id),
                  name_of(config_.eos_token_ids.empty() ? -1 : config_.eos_token_ids.front()));
  }
  add_routes();
  HttpFrontOptions front{.host = options_.host,
                         .port = options_.port,
                         .max_body_bytes = options_.max_body_bytes,
                         .max_connections = options_.max_connections,
                         .idle_timeout = options_.idle_timeout,
                         .listen_backlog = options_.listen_backlog,
                         .handler_threads = options_.handler_threads};
  front_ = std::make_unique<HttpFront>(
      front, [this](const HttpRequest& req, const ClientLink& link) { return route(req, link); },
      [this](const HttpRequest& req) { return authorize(req); });
}

void HttpServer::add_routes() {
  auto& r = routes_;
  // 503 once the engine is down (a rank lost, a step stuck) or the server is draining.
  r["/health"]["GET"] = [this](const HttpRequest&, const ClientLink&) {
    if (const auto why = unavailable()) return error_reply(503, "unavailable", *why);
    return json_reply(200, "{}");
  };
  r["/health_generate"]["GET"] = [this](const HttpRequest&, const ClientLink&) {
    const Reply h = health_generate();
    return json_reply(h.status, h.body);
  };
  r["/v1/models"]["GET"] = [this](const HttpRequest&, const ClientLink&) {
    return json_reply(200, dump(json{{"object", "list"},
                                     {"data", {{{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "aerie"},
                                                {"root", options_.model_name}, {"max_model_len", config_.max_position_embeddings}}}}}));
  };
  r["/get_model_info"]["GET"] = [this](const HttpRequest&, const ClientLink&) {
    return json_reply(200, dump(json{{"model_path", deployment_options_.model_path}, {"tokenizer_path", deployment_options_.model_path},
                                     {"is_generation", true}}));
  };
  r["/get_server_info"]["GET"] = [this](const HttpRequest&, const ClientLink&) {
    const auto& d = deployment_options_;
    const EngineLoad l = load();
    return json_reply(200, dump(json{{"model_path", d.model_path}, {"served_model_name", options_.model_name}, {"load_format", d.load_format},
                                     {"device", d.device}, {"dtype", d.dtype}, {"tp_size", d.tp_size}, {"dp_size", d.dp_size},
                                     {"max_running_requests", d.max_running_requests}, {"max_total_tokens", deployment_.kv_capacity_tokens()},
                                     {"chunked_prefill_size", d.chunked_prefill_size}, {"page_size", d.page_size},
                                     {"context_length", config_.max_position_embeddings}, {"vocab_size", config_.vocab_size},
                                     {"chat_template", chat_ ? json(chat_->name()) : json()},
                                     {"speculative_algorithm", d.speculative_algorithm.empty() ? json() : json(d.speculative_algorithm)},
                                     {"speculative_num_steps", d.speculative_algorithm.empty() ? json() : json(d.speculative_num_steps)},
                                     // sglang's bench_serving reads the accept length from here (null: no speculation yet).
                                     {"internal_states",
                                      json::array({json{{"num_running_reqs", l.running}, {"num_queue_reqs", l.queued},
                                                        {"avg_spec_accept_length",
                                                         l.spec_verify_ct > 0 ? json(static_cast<double>(l.spec_committed_tokens) /
                                                                                     static_cast<double>(l.spec_verify_ct))
                                                                              : json()}}})}}));
  };
  r["/metrics"]["GET"] = [this](const HttpRequest&, const ClientLink&) {
    HttpReply m = json_reply(200, metrics_.render(load()));
    m.content_type = "text/plain; version=0.0.4";
    return m;
  };
  // sglang answers GET and POST (no body needed); Aerie keeps no prefix cache between requests,
  // so there is nothing to flush.
  const auto flush = [](const HttpRequest&, const ClientLink&) {
    HttpReply f = json_reply(200, "Cache flushed.\n");
    f.content_type = "text/plain";
    return f;
  };
  r["/flush_cache"]["POST"] = flush;
  r["/flush_cache"]["GET"] = flush;
  // sglang's /tokenize ({"prompt": text, "add_special_tokens": bool} -> tokens, count,
  // max_model_len) and /detokenize ({"tokens": [...]} -> text), with the model's tokenizer.
  r["/tokenize"]["POST"] = [this](const HttpRequest& req, const ClientLink&) {
    const json j = parse_body(req);
    if (!tokenizer_) return error_reply(400, "invalid_request", "this model has no tokenizer");
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
      return error_reply(400, "invalid_request", "'prompt' (a string) is required");
    const bool special = j.contains("add_special_tokens") && j["add_special_tokens"].is_boolean() ? j["add_special_tokens"].get<bool>() : true;
    try {
      const auto ids = tokenizer_->encode(j["prompt"].get<std::string>(), special);
      return json_reply(200, dump(json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", config_.max_position_embeddings}}));
    } catch (const std::exception& e) {
      return error_reply(400, "invalid_request", ::aerie::client_message(e));
    }
  };
  r["/detokenize"]["POST"] = [this](const HttpRequest& req, const ClientLink&) {
    const json j = parse_body(req);
    if (!tokenizer_) return error_reply(400, "invalid_request", "this model has no tokenizer");
    std::vector<int32_t> ids;
    const bool ok = j.is_object() && j.contains("tokens") && j["tokens"].is_array() &&
                    std::all_of(j["tokens"].begin(), j["tokens"].end(), [&](const json& t) {
                      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= config_.vocab_size) return false;
                      ids.push_back(t.get<int32_t>());
                      return true;
                    });
    if (!ok) return error_reply(400, "invalid_request", "'tokens' must be a list of ids in the vocabulary");
    return json_reply(200, dump(json{{"text", valid_utf8(tokenizer_->decode_output(ids))}}));
  };
  r["/abort_request"]["POST"] = [this](const HttpRequest& req, const ClientLink&) {
    const json j = parse_body(req);
    if (!j.is_object() || !j.contains("rid") || !(j["rid"].is_string() || j["rid"].is_number_integer()))
      return error_reply(400, "invalid_request", "'rid' (string or integer) is required");
    const std::string rid = j["rid"].is_string() ? j["rid"].get<std::string>() : std::to_string(j["rid"].get<int64_t>());
    std::vector<caf::actor> sessions;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      if (auto it = live_.find(rid); it != live_.end()) sessions = it->second;
    }
    if (sessions.empty()) return error_reply(404, "not_found", "no request '" + rid + "' in progress");
    for (const auto& session : sessions)
      caf::anon_send(session, actors::AbortRequest{});  // each session forwards it behind its own submission
    return json_reply(200, "{}");
  };
  auto endpoint = [this](auto parse) {
    return [this, parse](const HttpRequest& req, const ClientLink& link) {
      if (const auto why = unavailable()) return error_reply(503, "unavailable", *why);
      const json j = parse_body(req);
      std::optional<ParsedRequest> p;
      try {
        p = parse(j);
      } catch (const std::exception& e) {
        return error_reply(400, "invalid_request", ::aerie::client_message(e));
      }
      return serve(std::move(*p), link);
    };
  };
  r["/generate"]["POST"] = endpoint([this](const json& j) { return parse_generate_request(j, limits()); });
  r["/v1/completions"]["POST"] = endpoint([this](const json& j) { return parse_completion_request(j, limits()); });
  r["/v1/chat/completions"]["POST"] =
      endpoint([this](const json& j) { return parse_chat_request(j, limits(), chat_ ? &*chat_ : nullptr); });
}

HttpReply HttpServer::route(const HttpRequest& req, const ClientLink& link) {
  const auto path = routes_.find(req.path);
  if (path == routes_.end()) return error_reply(404, "not_found", "no endpoint " + req.path);
  const auto handler = path->second.find(req.method);
  if (handler == path->second.end()) {
    std::string allowed;
    for (const auto& [method, _] : path->second) allowed += (allowed.empty() ? "" : ", ") + method;
    HttpReply r = error_reply(405, "method_not_allowed", req.method + " is not allowed on " + req.path + " (allowed: " + allowed + ")");
    r.headers.emplace_back("Allow", allowed);
    return r;
  }
  try {
    return handler->second(req, link);
  } catch (const HttpError& e) {
    return error_reply(e.status, e.code, e.message);
  }
}

// --api-key: every endpoint but the liveness probe wants the key (as sglang's middleware);
// checked on the headers, so a refused client's body is never read.
std::optional<HttpReply> HttpServer::authorize(const HttpRequest& req) const {
  if (options_.api_key.empty() || (req.method == "GET" && req.path == "/health")) return std::nullopt;
  if (req.header("authorization") == "Bearer " + options_.api_key) return std::nullopt;
  HttpReply r = error_reply(401, "unauthorized", "a valid 'Authorization: Bearer <api key>' header is required");
  r.close = true;
  return r;
}

// Handlers still running touch the members below front_: stop serving (and join them) first.
HttpServer::~HttpServer() { front_->stop(); }

RequestLimits HttpServer::limits() const {
  RequestLimits l = request_limits(deployment_, tokenizer_.get());
  l.sampling = sampling_defaults_;
  return l;
}

std::string HttpServer::client_id(const ParsedRequest& p) {
  if (!p.rid.empty()) return p.rid;
  switch (p.kind) {
    case ApiKind::kCompletion: return "cmpl-" + random_request_id();
    case ApiKind::kChat: return "chatcmpl-" + random_request_id();
    case ApiKind::kGenerate: break;
  }
  return random_request_id();
}

EngineLoad HttpServer::load() {
  EngineLoad l;
  caf::scoped_actor self{deployment_.system()};
  self->request(deployment_.router(), std::chrono::seconds(5), actors::GetLoad{})
      .receive([&](actors::LoadReport& r) {
                 l = {r.running, r.queued, r.kv_used_tokens, r.kv_total_tokens, r.spec_verify_ct, r.spec_accepted_tokens, r.forward_seconds,
                      r.forward_gap_seconds};
               },
               [](caf::error&) {});
  return l;
}

HttpReply HttpServer::serve(ParsedRequest p, const ClientLink& link) {
  const std::string id = client_id(p);
  if (!reserve(id)) return error_reply(409, "rid_in_use", "a request with rid '" + id + "' is still in progress");
  if (p.stream) return stream(std::move(p), id);  // the stream gives the rid back when it ends
  struct GiveBack {
    HttpServer* server;
    const std::string& id;
    ~GiveBack() { server->untrack(id); }
  } give_back{this, id};  // also when the session throws
  if (p.n > 1) return serve_samples(p, id, link);
  const uint64_t rid = next_rid_++;
  RequestSession session(deployment_, tokenizer_.get(), metrics_, rid, p);
  track(id, session.handle());
  ResponseWriter writer(p, id, options_.model_name, tokenizer_.get());
  const auto gone = [&link] { return link.gone(); };
  SessionUpdate u;
  do {
    u = session.next(std::chrono::seconds(600), gone);
    writer.absorb(u);
  } while (!u.finished);
  log_request(id, u, session.seconds_since_arrival());
  if (!u.error.empty()) return error_reply(u.status, error_code(u.status), u.error);
  return json_reply(200, dump(writer.body(u, session.seconds_since_arrival())));
}

// n > 1, not streamed: every sample is a request of its own with seed + i, all submitted as
// one group (one Scheduler admits them together: the prompt is computed once and shared),
// then gathered: sglang answers with a list of n replies, OpenAI with n choices (index i) and
// the usage summed over them.
HttpReply HttpServer::serve_samples(const ParsedRequest& p, const std::string& id, const ClientLink& link) {
  std::vector<std::unique_ptr<RequestSession>> sessions;
  std::vector<std::unique_ptr<ResponseWriter>> writers;
  for (int i = 0; i < p.n; ++i) {
    const ParsedRequest one = sample_request(p, i);
    sessions.push_back(std::make_unique<RequestSession>(deployment_, tokenizer_.get(), metrics_, next_rid_++, one,
                                                        RequestSession::Submission::kTogether));
    writers.push_back(std::make_unique<ResponseWriter>(one, id, options_.model_name, tokenizer_.get()));
  }
  for (const auto& session : sessions) track(id, session->handle());
  RequestSession::submit_together(sessions);
  const auto gone = [&link] { return link.gone(); };
  std::vector<json> bodies;
  for (size_t i = 0; i < sessions.size(); ++i) {
    SessionUpdate u;
    do {
      u = sessions[i]->next(std::chrono::seconds(600), gone);
      writers[i]->absorb(u);
    } while (!u.finished);
    log_request(id + "#" + std::to_string(i), u, sessions[i]->seconds_since_arrival());
    if (!u.error.empty()) return error_reply(u.status, error_code(u.status), u.error);  // the others end with their sessions
    bodies.push_back(writers[i]->body(u, sessions[i]->seconds_since_arrival()));
  }
  if (p.kind == ApiKind::kGenerate) return json_reply(200, dump(json(bodies)));
  json merged = bodies.front();
  merged["choices"] = json::array();
  int64_t completion = 0;
  for (size_t i = 0; i < bodies.size(); ++i) {
    json choice = bodies[i]["choices"][0];
    choice["index"] = i;
    merged["choices"].push_back(std::move(choice));
    completion += bodies[i]["usage"].value("completion_tokens", int64_t{0});
  }
  merged["usage"]["completion_tokens"] = completion;
  merged["usage"]["total_tokens"] = merged["usage"].value("prompt_tokens", int64_t{0}) + completion;
  return json_reply(200, dump(merged));
}

// Server-sent events: `data: {...}` per update, then `data: [DONE]`. The handler thread runs
// the stream: one session, or with n > 1 one thread per sample (seed + i), each sample's
// chunks labelled with its index as they come and OpenAI's usage chunk summed once at the
// end. A client that goes away aborts every sample and frees their pages.
HttpReply HttpServer::stream(ParsedRequest p, const std::string& id) {
  HttpReply reply;
  reply.content_type = "text/event-stream";
  reply.headers.emplace_back("Cache-Control", "no-cache");
  reply.stream = [this, p = std::move(p), id](const ChunkSink& sink, const ClientLink& link) {
    struct GiveBack {
      HttpServer* server;
      const std::string& id;
      ~GiveBack() { server->untrack(id); }
    } give_back{this, id};
    std::mutex sink_mu;  // samples write from their own threads
    bool client_left = false;
    auto write = [&](const std::string& payload) {
      std::lock_guard<std::mutex> lock(sink_mu);
      client_left = client_left || !sink("data: " + payload + "\n\n");
      return !client_left;
    };
    const auto gone = [&] {
      {
        std::lock_guard<std::mutex> lock(sink_mu);
        if (client_left) return true;
      }
      return link.gone();
    };
    json usage;  // n > 1: the samples' usage, summed
    std::mutex usage_mu;
    // One sample's stream, on its own thread when n > 1 (the session is used by it alone).
    auto run_sample = [&](int i, RequestSession& session) {
      const ParsedRequest one = sample_request(p, i);
      track(id, session.handle());
      ResponseWriter writer(one, id, options_.model_name, tokenizer_.get());
      SessionUpdate u;
      do {
        u = session.next(std::chrono::seconds(600), gone);
        if (u.status == 499) return;  // aborted: nobody to tell
        if (!u.error.empty()) {
          write(error_body(error_code(u.status), u.error));
          break;
        }
        for (auto& c : writer.chunks(u, session.seconds_since_arrival())) {
          if (p.n > 1 && is_usage_chunk(c)) {
            std::lock_guard<std::mutex> lock(usage_mu);
            if (usage.is_null()) {
              usage = c;
            } else {
              usage["usage"]["completion_tokens"] = usage["usage"].value("completion_tokens", int64_t{0}) + c["usage"].value("completion_tokens", int64_t{0});
              usage["usage"]["total_tokens"] = usage["usage"].value("prompt_tokens", int64_t{0}) + usage["usage"].value("completion_tokens", int64_t{0});
            }
            continue;
          }
          if (p.n > 1) label_sample(c, p.kind, i);
          if (!write(dump(c))) {
            session.abort();  // the client is gone: free its pages
            return;
          }
        }
      } while (!u.finished);
      log_request(p.n > 1 ? id + "#" + std::to_string(i) : id, u, session.seconds_since_arrival());
    };
    if (p.n <= 1) {
      RequestSession session(deployment_, tokenizer_.get(), metrics_, next_rid_++, sample_request(p, 0));
      run_sample(0, session);
    } else {
      // The samples are submitted as one group (admitted together: the prompt is computed
      // once and shared), then each streams on a thread of its own.
      std::vector<std::unique_ptr<RequestSession>> sessions;
      for (int i = 0; i < p.n; ++i)
        sessions.push_back(std::make_unique<RequestSession>(deployment_, tokenizer_.get(), metrics_, next_rid_++, sample_request(p, i),
                                                            RequestSession::Submission::kTogether));
      RequestSession::submit_together(sessions);
      std::vector<std::thread> samples;
      for (int i = 0; i < p.n; ++i) samples.emplace_back(run_sample, i, std::ref(*sessions[static_cast<size_t>(i)]));
      for (auto& t : samples) t.join();
      if (!usage.is_null()) write(dump(usage));
    }
    write("[DONE]");
  };
  return reply;
}

bool HttpServer::reserve(const std::string& client_rid) {
  std::lock_guard<std::mutex> lock(live_mu_);
  return live_.emplace(client_rid, std::vector<caf::actor>{}).second;  // no session yet: not abortable
}

void HttpServer::track(const std::string& client_rid, caf::actor session) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_[client_rid].push_back(std::move(session));
}

void HttpServer::untrack(const std::string& client_rid) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_.erase(client_rid);
  live_cv_.notify_all();
}

void HttpServer::log_request(const std::string& id, const SessionUpdate& u, double seconds) const {
  if (!options_.log_requests) return;
  if (!u.error.empty()) {
    AERIE_LOG_INFO("request " << id << ": " << u.status << " " << u.error);
    return;
  }
  AERIE_LOG_INFO("request " << id << ": " << u.result.prompt_tokens << " prompt + " << u.result.output_ids.size() << " output tokens, "
                            << u.result.finish_reason << ", " << seconds << " s (queued " << u.result.queue_seconds << " s)");
}

std::optional<std::string> HttpServer::unavailable() const {
  if (auto f = deployment_.fault()) return "the engine is down: " + *f;
  if (draining_) return std::string("the server is shutting down");
  return std::nullopt;
}

HttpServer::Reply HttpServer::health_generate() {
  if (const auto why = unavailable()) return {503, error_body("unavailable", *why)};
  ParsedRequest probe;
  probe.request.prompt = {config_.bos_token_id >= 0 ? config_.bos_token_id : 0};
  probe.request.max_new_tokens = 1;
  probe.request.sampling.temperature = 0.0f;
  const uint64_t rid = next_rid_++;
  RequestSession session(deployment_, nullptr, metrics_, rid, probe);
  SessionUpdate u;
  do u = session.next(std::chrono::seconds(60));
  while (!u.finished);
  if (!u.error.empty()) return {503, error_body("unhealthy", u.error)};
  return {200, "{}"};
}

void HttpServer::start() {
  front_->start();
  bound_port_ = front_->port();
}

void HttpServer::listen() {
  start();
  std::unique_lock<std::mutex> lock(stop_mu_);
  stop_cv_.wait(lock, [this] { return stopped_; });
}

void HttpServer::stop() {
  // Graceful drain: refuse new work (503) at once, let what is in flight finish within the
  // shutdown timeout, then stop serving.
  draining_ = true;
  const auto deadline = std::chrono::steady_clock::now() + options_.shutdown_timeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      if (live_.empty()) break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      AERIE_LOG_WARNING("shutting down with requests still in flight after " << options_.shutdown_timeout.count() << " s");
      break;
    }
    std::unique_lock<std::mutex> lock(live_mu_);
    live_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  front_->stop();
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopped_ = true;
  }
  stop_cv_.notify_all();
}

}  // namespace aerie::launch
