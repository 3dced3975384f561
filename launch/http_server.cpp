#include "launch/http_server.hpp"

#include <limits>

#include <httplib.h>
#include <sys/socket.h>

#include <caf/all.hpp>
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

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

// The error code of an engine reply's status: 400 the request was rejected, 500 the engine
// failed it, 503 the engine is down.
std::string error_code(int status) { return status == 500 ? "engine_error" : status == 503 ? "unavailable" : "rejected"; }

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

// Parses a body as JSON, or answers 400 itself (invalid UTF-8 and NaN are malformed JSON;
// nesting past kMaxJsonDepth is refused while parsing).
std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res) {
  try {
    return parse_client_json(req.body);
  } catch (const std::exception& e) {
    send_json(res, 400, error_body("invalid_json", ::aerie::client_message(e)));
    return std::nullopt;
  }
}

}  // namespace

HttpServer::HttpServer(Deployment& deployment, model::LlamaConfig config, std::unique_ptr<model::TextTokenizer> tokenizer,
                       DeploymentOptions deployment_options, HttpOptions options)
    : deployment_(deployment),
      config_(std::move(config)),
      tokenizer_(std::move(tokenizer)),
      deployment_options_(std::move(deployment_options)),
      options_(std::move(options)),
      metrics_(options_.model_name, deployment_options_.speculative_algorithm.empty() ? 0 : deployment_options_.speculative_num_steps),
      server_(std::make_unique<httplib::Server>()) {
  if (!deployment_options_.model_path.empty()) sampling_defaults_ = model::load_generation_config(deployment_options_.model_path).sampling;
  if (tokenizer_) {
    auto name_of = [&](int32_t id) { return id >= 0 ? tokenizer_->token_text(id) : std::string(); };
    chat_.emplace(find_chat_template(options_.chat_template, deployment_options_.model_path), *tokenizer_, name_of(config_.bos_token_id),
                  name_of(config_.eos_token_ids.empty() ? -1 : config_.eos_token_ids.front()));
  }
  auto& s = *server_;
  // cpp-httplib's default pool is max(8, cores - 1) threads: far too few for requests
  // that wait on the engine. Each handler only blocks on its own reply.
  const int threads = options_.handler_threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(options_.max_body_bytes);
  // Debian's libcpp-httplib listens with a backlog of 5 (compiled in): hundreds of clients
  // connecting at once would stall in SYN retries. Keep the listening socket to raise it.
  s.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);  // SO_REUSEADDR / SO_REUSEPORT as before
    listen_fd_ = sock;
  });

  // 503 once the engine is down (a rank lost, a step stuck) or the server is draining.
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (const auto why = unavailable()) return send_json(res, 503, error_body("unavailable", *why));
    res.set_content("{}", "application/json");
  });
  s.Get("/health_generate", [this](const httplib::Request&, httplib::Response& res) {
    const Reply r = health_generate();
    send_json(res, r.status, r.body);
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json{{"object", "list"},
                              {"data", {{{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "aerie"},
                                         {"root", options_.model_name}, {"max_model_len", config_.max_position_embeddings}}}}}),
                    "application/json");
  });
  s.Get("/get_model_info", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json{{"model_path", deployment_options_.model_path}, {"tokenizer_path", deployment_options_.model_path},
                              {"is_generation", true}}),
                    "application/json");
  });
  s.Get("/get_server_info", [this](const httplib::Request&, httplib::Response& res) {
    const auto& d = deployment_options_;
    const EngineLoad l = load();
    res.set_content(dump(json{{"model_path", d.model_path}, {"served_model_name", options_.model_name}, {"load_format", d.load_format},
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
                                                  l.spec_verify_ct > 0 ? json(static_cast<double>(l.spec_committed_tokens) / static_cast<double>(l.spec_verify_ct))
                                                                       : json()}}})}}),
                    "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(load()), "text/plain; version=0.0.4");
  });
  // sglang answers GET and POST (no body needed); Aerie keeps no prefix cache between requests,
  // so there is nothing to flush.
  const auto flush = [](const httplib::Request&, httplib::Response& res) { res.set_content("Cache flushed.\n", "text/plain"); };
  s.Post("/flush_cache", flush);
  s.Get("/flush_cache", flush);
  // sglang's /tokenize ({"prompt": text, "add_special_tokens": bool} -> tokens, count,
  // max_model_len) and /detokenize ({"tokens": [...]} -> text), with the model's tokenizer.
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    const auto j = parse_body(req, res);
    if (!j) return;
    if (!tokenizer_) return send_json(res, 400, error_body("invalid_request", "this model has no tokenizer"));
    if (!j->is_object() || !j->contains("prompt") || !(*j)["prompt"].is_string())
      return send_json(res, 400, error_body("invalid_request", "'prompt' (a string) is required"));
    const bool special = j->value("add_special_tokens", true);
    try {
      const auto ids = tokenizer_->encode((*j)["prompt"].get<std::string>(), special);
      send_json(res, 200, dump(json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", config_.max_position_embeddings}}));
    } catch (const std::exception& e) {
      send_json(res, 400, error_body("invalid_request", ::aerie::client_message(e)));
    }
  });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    const auto j = parse_body(req, res);
    if (!j) return;
    if (!tokenizer_) return send_json(res, 400, error_body("invalid_request", "this model has no tokenizer"));
    std::vector<int32_t> ids;
    const bool ok = j->is_object() && j->contains("tokens") && (*j)["tokens"].is_array() &&
                    std::all_of((*j)["tokens"].begin(), (*j)["tokens"].end(), [&](const json& t) {
                      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= config_.vocab_size) return false;
                      ids.push_back(t.get<int32_t>());
                      return true;
                    });
    if (!ok) return send_json(res, 400, error_body("invalid_request", "'tokens' must be a list of ids in the vocabulary"));
    send_json(res, 200, dump(json{{"text", valid_utf8(tokenizer_->decode_output(ids))}}));
  });
  s.Post("/abort_request", [this](const httplib::Request& req, httplib::Response& res) {
    const auto j = parse_body(req, res);
    if (!j) return;
    if (!j->is_object() || !j->contains("rid") || !((*j)["rid"].is_string() || (*j)["rid"].is_number_integer()))
      return send_json(res, 400, error_body("invalid_request", "'rid' (string or integer) is required"));
    const std::string rid = (*j)["rid"].is_string() ? (*j)["rid"].get<std::string>() : std::to_string((*j)["rid"].get<int64_t>());
    caf::actor session;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      if (auto it = live_.find(rid); it != live_.end()) session = it->second;
    }
    if (!session) return send_json(res, 404, error_body("not_found", "no request '" + rid + "' in progress"));
    caf::anon_send(session, actors::AbortRequest{});  // the session forwards it behind its own submission
    res.set_content("{}", "application/json");
  });
  auto endpoint = [this](auto parse) {
    return [this, parse](const httplib::Request& req, httplib::Response& res) {
      if (const auto why = unavailable()) return send_json(res, 503, error_body("unavailable", *why));
      const auto j = parse_body(req, res);
      if (!j) return;
      std::optional<ParsedRequest> p;
      try {
        p = parse(*j);
      } catch (const std::exception& e) {
        return send_json(res, 400, error_body("invalid_request", ::aerie::client_message(e)));
      }
      serve(std::move(*p), res);
    };
  };
  s.Post("/generate", endpoint([this](const json& j) { return parse_generate_request(j, limits()); }));
  s.Post("/v1/completions", endpoint([this](const json& j) { return parse_completion_request(j, limits()); }));
  s.Post("/v1/chat/completions", endpoint([this](const json& j) { return parse_chat_request(j, limits(), chat_ ? &*chat_ : nullptr); }));
  // Bodies the size cap cannot see coming are refused before they are read: compressed ones
  // (cpp-httplib inflates them first: 1 MB of gzip became 1 GB) and chunked ones (0.11 checks
  // the cap only against Content-Length). JSON clients send a plain body with a length.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // --api-key: every endpoint but the liveness probe wants the key (as sglang's middleware).
    if (!options_.api_key.empty() && !(req.method == "GET" && req.path == "/health") &&
        req.get_header_value("Authorization") != "Bearer " + options_.api_key) {
      res.status = 401;
      res.set_content(error_body("unauthorized", "a valid 'Authorization: Bearer <api key>' header is required"), "application/json");
      res.set_header("Connection", "close");  // its body is never read (see below)
      return httplib::Server::HandlerResponse::Handled;
    }
    const std::string encoding = req.get_header_value("Content-Encoding");
    const std::string transfer = req.get_header_value("Transfer-Encoding");
    if (!encoding.empty() && encoding != "identity") {
      res.status = 415;
      res.set_content(error_body("unsupported_encoding", "Content-Encoding '" + encoding + "' is not accepted; send the body uncompressed"),
                      "application/json");
    } else if (!transfer.empty() && transfer != "identity") {
      res.status = 411;
      res.set_content(error_body("length_required", "send the body with a Content-Length (Transfer-Encoding '" + transfer + "' is refused)"),
                      "application/json");
    } else {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    // The body is never read: cpp-httplib 0.11 ignores this header and reads what follows as
    // requests (each refused, 414) until its keep-alive count of 5 ends the connection, so the
    // cost stays a few 8 KB lines whatever the body's size.
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
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
      .receive([&](actors::LoadReport& r) { l = {r.running, r.queued, r.kv_used_tokens, r.kv_total_tokens, r.spec_verify_ct, r.spec_accepted_tokens}; },
               [](caf::error&) {});
  return l;
}

void HttpServer::serve(ParsedRequest p, httplib::Response& res) {
  if (p.n > 1 && p.stream) return send_json(res, 400, error_body("invalid_request", "'n' > 1 with streaming is not supported yet"));
  const std::string id = client_id(p);
  if (!reserve(id)) return send_json(res, 409, error_body("rid_in_use", "a request with rid '" + id + "' is still in progress"));
  if (p.stream) return stream(std::move(p), id, res);  // its resource releaser gives the rid back
  struct GiveBack {
    HttpServer* server;
    const std::string& id;
    ~GiveBack() { server->untrack(id); }
  } give_back{this, id};  // also when the session throws
  if (p.n > 1) return serve_samples(p, id, res);
  const uint64_t rid = next_rid_++;
  RequestSession session(deployment_, tokenizer_.get(), metrics_, rid, p);
  track(id, session.handle());
  ResponseWriter writer(p, id, options_.model_name, tokenizer_.get());
  SessionUpdate u;
  do {
    u = session.next();
    writer.absorb(u);
  } while (!u.finished);
  log_request(id, u, session.seconds_since_arrival());
  if (!u.error.empty()) return send_json(res, u.status, error_body(error_code(u.status), u.error));
  send_json(res, 200, dump(writer.body(u, session.seconds_since_arrival())));
}

// n > 1: every sample is a request of its own with seed + i, all submitted at once (the
// engine batches them), then gathered: sglang answers with a list of n replies, OpenAI with
// n choices (index i) and the usage summed over them.
void HttpServer::serve_samples(const ParsedRequest& p, const std::string& id, httplib::Response& res) {
  std::vector<std::unique_ptr<RequestSession>> sessions;
  std::vector<std::unique_ptr<ResponseWriter>> writers;
  for (int i = 0; i < p.n; ++i) {
    ParsedRequest one = p;
    one.n = 1;
    // seed + i, wrapping within the non-negative seeds.
    one.request.sampling.seed =
        static_cast<int64_t>((static_cast<uint64_t>(p.request.sampling.seed) + static_cast<uint64_t>(i)) & static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    sessions.push_back(std::make_unique<RequestSession>(deployment_, tokenizer_.get(), metrics_, next_rid_++, one));
    writers.push_back(std::make_unique<ResponseWriter>(one, id, options_.model_name, tokenizer_.get()));
  }
  if (!sessions.empty()) track(id, sessions.front()->handle());
  std::vector<json> bodies;
  for (size_t i = 0; i < sessions.size(); ++i) {
    SessionUpdate u;
    do {
      u = sessions[i]->next();
      writers[i]->absorb(u);
    } while (!u.finished);
    log_request(id + "#" + std::to_string(i), u, sessions[i]->seconds_since_arrival());
    if (!u.error.empty()) return send_json(res, u.status, error_body(error_code(u.status), u.error));
    bodies.push_back(writers[i]->body(u, sessions[i]->seconds_since_arrival()));
  }
  if (p.kind == ApiKind::kGenerate) return send_json(res, 200, dump(json(bodies)));
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
  send_json(res, 200, dump(merged));
}

// Server-sent events: `data: {...}` per update, then `data: [DONE]`. The session (and its
// scoped actor) is made on the first call of the content provider, in the connection's
// thread, which makes every later call too. A client that goes away aborts its request.
void HttpServer::stream(ParsedRequest p, const std::string& id, httplib::Response& res) {
  struct Stream {
    ParsedRequest request;
    uint64_t rid = 0;
    std::string id;
    std::unique_ptr<RequestSession> session;
    std::unique_ptr<ResponseWriter> writer;
  };
  auto st = std::make_shared<Stream>();
  st->rid = next_rid_++;
  st->id = id;
  st->request = std::move(p);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& payload) {
          const std::string line = "data: " + payload + "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (!st->session) {
          st->session = std::make_unique<RequestSession>(deployment_, tokenizer_.get(), metrics_, st->rid, st->request);
          st->writer = std::make_unique<ResponseWriter>(st->request, st->id, options_.model_name, tokenizer_.get());
          track(st->id, st->session->handle());
        }
        const SessionUpdate u = st->session->next();
        bool alive = true;
        if (!u.error.empty()) {
          alive = write(error_body(error_code(u.status), u.error));
        } else {
          for (const auto& c : st->writer->chunks(u, st->session->seconds_since_arrival())) alive = alive && write(dump(c));
        }
        if (!alive) {
          st->session->abort();  // the client is gone: free its pages
          return false;
        }
        if (u.finished) {
          log_request(st->id, u, st->session->seconds_since_arrival());
          write("[DONE]");
          sink.done();
        }
        return true;
      },
      [this, st](bool) {
        untrack(st->id);
        st->session.reset();  // aborts the request if it has not ended
      });
}

bool HttpServer::reserve(const std::string& client_rid) {
  std::lock_guard<std::mutex> lock(live_mu_);
  return live_.emplace(client_rid, caf::actor{}).second;  // no session yet: not abortable
}

void HttpServer::track(const std::string& client_rid, caf::actor session) {
  std::lock_guard<std::mutex> lock(live_mu_);
  live_[client_rid] = std::move(session);
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

void HttpServer::listen() {
  AERIE_CHECK(server_->bind_to_port(options_.host.c_str(), options_.port), "cannot listen on " << options_.host << ":" << options_.port);
  // listen() again on a listening socket only changes its backlog (the kernel caps it at somaxconn).
  AERIE_CHECK(listen_fd_ >= 0 && ::listen(listen_fd_, options_.listen_backlog) == 0, "cannot set the listen backlog");
  bound_port_ = options_.port;
  server_->listen_after_bind();
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
  server_->stop();
}

}  // namespace aerie::launch
