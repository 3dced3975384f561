#pragma once
// The HTTP API of aerie-serve (rank 0): sglang's native endpoints over the Router.
//   GET  /health, /health_generate (runs a one-token generation), /get_server_info, /v1/models
//   POST /abort_request {"rid": ...}: ends that request (its reply says finish_reason "abort")
//   POST /generate  {"text" | "input_ids", "sampling_params": {...}, "rid", "stream"}
//                   (with "stream": true, server-sent events as tokens are produced)
// Every bad request gets a 4xx JSON error {"error": {"code", "message"}} and the server stays
// healthy. Requests run on a large handler pool, so hundreds can wait on the engine at once.
#include <atomic>
#include <map>
#include <mutex>
#include <memory>
#include <string>

#include <variant>

#include "launch/deployment.hpp"
#include "launch/json_request.hpp"
#include "model/config.hpp"
#include "model/text_tokenizer.hpp"

namespace httplib {
class Server;
struct Response;
}

namespace aerie::launch {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string model_name = "aerie";
  size_t max_body_bytes = 16u << 20;
  int handler_threads = 512;
};

class HttpServer {
 public:
  HttpServer(Deployment& deployment, model::LlamaConfig config, std::unique_ptr<model::TextTokenizer> tokenizer,
             DeploymentOptions deployment_options, HttpOptions options);
  ~HttpServer();
  // Serves until stop(); throws when the address cannot be bound.
  void listen();
  void stop();
  int bound_port() const { return bound_port_; }

 private:
  struct Reply {
    int status;
    std::string body;
  };
  std::variant<ParsedRequest, Reply> parse(const std::string& body, bool* stream) const;
  Reply run(ParsedRequest p);  // a parsed, non-streaming /generate
  void stream_generate(ParsedRequest p, httplib::Response& res);
  Reply health_generate();

  Deployment& deployment_;
  model::LlamaConfig config_;
  std::unique_ptr<model::TextTokenizer> tokenizer_;
  DeploymentOptions deployment_options_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<uint64_t> next_rid_{1u << 20};  // apart from the JSON-lines frontend's ids
  std::mutex live_mu_;
  std::map<std::string, uint64_t> live_;  // client rid -> engine rid, while in progress
  void track(const std::string& client_rid, uint64_t rid);
  void untrack(const std::string& client_rid);
  int bound_port_ = 0;
};

}  // namespace aerie::launch
