#pragma once
// The HTTP API of aerie-serve (rank 0), over the Router:
//   sglang native: POST /generate, GET /health, /health_generate (a one-token generation;
//     503 while draining or broken), /get_server_info, /get_model_info, POST /abort_request,
//     POST /flush_cache
//   OpenAI: POST /v1/completions, /v1/chat/completions, GET /v1/models
//   Prometheus: GET /metrics
// Streaming replies are server-sent events. A client that disconnects aborts its request,
// streamed or not, and frees its KV pages. Every bad request gets a 4xx JSON error
// {"error": {"code", "type", "message"}} and the server stays healthy. The transport is
// HttpFront (libmicrohttpd, one epoll thread): slow clients hold no thread, and handler
// threads are taken only by complete requests, so hundreds can wait on the engine at once.
#include <caf/actor.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch/deployment.hpp"
#include "launch/serving/chat_template.hpp"
#include "launch/serving/http_front.hpp"
#include "launch/serving/json_request.hpp"
#include "launch/serving/request_session.hpp"
#include "launch/serving/serving_metrics.hpp"
#include "model/config.hpp"
#include "model/text_tokenizer.hpp"

namespace aerie::launch {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string model_name = "aerie";
  std::string chat_template;  // a .jinja file or a built-in name; empty: the model's own
  size_t max_body_bytes = 16u << 20;
  int handler_threads = 1024;   // requests in progress at once (more wait for a thread)
  int max_connections = 16384;  // open client sockets at once
  std::chrono::seconds idle_timeout{60};  // a connection silent this long is closed
  int listen_backlog = 4096;
  std::chrono::seconds shutdown_timeout{30};  // stop(): how long requests in flight may take to finish
  std::string api_key;                        // non-empty: every endpoint but GET /health wants "Authorization: Bearer <key>"
  bool log_requests = false;                  // one info line per finished request
};

class HttpServer {
 public:
  HttpServer(Deployment& deployment, model::LlamaConfig config, std::unique_ptr<model::TextTokenizer> tokenizer,
             DeploymentOptions deployment_options, HttpOptions options);
  ~HttpServer();
  // Serves until stop(); throws when the address cannot be bound.
  void listen();
  // Binds and serves on the front's own thread; returns at once (listen() = start() + wait).
  void start();
  // Graceful drain: refuses new work (health checks answer 503), waits up to
  // shutdown_timeout for the requests in flight to finish, then stops serving.
  void stop();
  int bound_port() const { return bound_port_; }

 private:
  struct Reply {
    int status;
    std::string body;
  };
  using Route = std::function<HttpReply(const HttpRequest&, const ClientLink&)>;
  void add_routes();
  HttpReply route(const HttpRequest& req, const ClientLink& link);
  std::optional<HttpReply> authorize(const HttpRequest& req) const;  // --api-key, before the body is read
  HttpReply serve(ParsedRequest p, const ClientLink& link);  // any generation endpoint, streaming or not
  HttpReply stream(ParsedRequest p, const std::string& id);
  HttpReply serve_samples(const ParsedRequest& p, const std::string& id, const ClientLink& link);  // n > 1, not streamed
  Reply health_generate();
  // --log-requests: one info line for a finished request.
  void log_request(const std::string& id, const SessionUpdate& u, double seconds) const;
  // Why new work is refused (the engine is down, the server drains), or nothing.
  std::optional<std::string> unavailable() const;
  EngineLoad load();
  // The request's id: the client's rid, or a random one.
  static std::string client_id(const ParsedRequest& p);
  RequestLimits limits() const;

  Deployment& deployment_;
  model::LlamaConfig config_;
  std::unique_ptr<model::TextTokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_;
  model::SamplingDefaults sampling_defaults_;  // generation_config.json: for fields a request leaves out
  DeploymentOptions deployment_options_;
  HttpOptions options_;
  ServingMetrics metrics_;
  std::map<std::string, std::map<std::string, Route>> routes_;  // path -> method -> handler
  std::unique_ptr<HttpFront> front_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_rid_{1u << 20};  // apart from the JSON-lines frontend's ids
  std::mutex live_mu_;
  std::condition_variable live_cv_;  // a request left live_
  std::map<std::string, std::vector<caf::actor>> live_;  // client rid -> its sessions (one per sample), while in progress
  // Claims a rid for a new request: false when a request with it is still in progress.
  bool reserve(const std::string& client_rid);
  // Adds a session of the request (n > 1: each sample's), so /abort_request reaches it.
  void track(const std::string& client_rid, caf::actor session);
  void untrack(const std::string& client_rid);
  int bound_port_ = 0;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopped_ = false;
};

}  // namespace aerie::launch
