// aerie-serve: the engine as a long-running service. Rank 0 serves the HTTP API (or, with
// --stdin-json, reads sglang /generate bodies as JSON lines on stdin and writes one result
// line per request); under mpirun the other ranks serve their replicas until rank 0 stops
// (SIGINT/SIGTERM, or the end of stdin).
#include <pthread.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/frontend_actor.hpp"
#include "kernels/error.hpp"
#include "kernels/log.hpp"
#include "launch/serving/http_server.hpp"
#include "launch/serving/json_request.hpp"
#include "launch/serve_options.hpp"

namespace {

using namespace aerie;

void serve_stdin_json(launch::Deployment& deployment) {
  std::cerr << "aerie-serve: ready; reading requests as JSON lines on stdin\n";
  std::mutex out_mu;
  auto write = [&out_mu](const std::string& line) {
    std::lock_guard<std::mutex> lock(out_mu);
    std::cout << line << std::endl;
  };
  const launch::RequestLimits limits = launch::request_limits(deployment, nullptr);
  auto parse = [limits](const std::string& text) {
    auto p = launch::parse_generate_request(launch::parse_client_json(text), limits);
    // The JSON-lines frontend writes whole results: what needs the HTTP layer is refused, not ignored.
    AERIE_CHECK(p.stop.empty(), "'stop' strings are served by the HTTP API; use stop_token_ids here");
    AERIE_CHECK(!p.stream, "'stream' is served by the HTTP API");
    AERIE_CHECK(!p.return_logprob, "'return_logprob' is served by the HTTP API");
    return std::pair{p.rid, std::move(p.request)};
  };
  auto frontend = deployment.system().spawn(actors::frontend_actor, deployment.router(), parse, write);
  std::string line;
  while (std::getline(std::cin, line))
    if (!line.empty()) caf::anon_send(frontend, actors::ClientLine{line});
  caf::scoped_actor self{deployment.system()};
  self->request(frontend, caf::infinite, actors::DrainRequest{}).receive([](bool) {}, [](caf::error&) {});
  self->send_exit(frontend, caf::exit_reason::user_shutdown);
}

}  // namespace

int main(int argc, char** argv) {
  // SIGINT/SIGTERM are taken by one thread (sigwait) that stops the server; blocked here,
  // before any other thread exists, so every later thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    auto options = launch::parse_serve_args(argc, argv);
    if (!options) return 0;
    auto world = parallel::make_process_group(&argc, &argv);
    if (world->rank() == 0)
      for (const auto& w : options->warnings) AERIE_LOG_WARNING(w);
    launch::Deployment deployment(options->deployment, *world);
    if (!deployment.is_rank0()) {
      deployment.shutdown();
      return 0;
    }
    const auto& d = options->deployment;
    const auto& config = deployment.config();
    if (options->stdin_json) {
      serve_stdin_json(deployment);
    } else {
      std::string name = options->served_model_name;
      if (name.empty()) name = d.model_path.empty() ? d.model_shape : std::filesystem::path(d.model_path).filename().string();
      launch::HttpServer server(deployment, config, d.model_path.empty() ? nullptr : model::load_text_tokenizer(d.model_path),
                                d, {.host = options->host, .port = options->port, .model_name = name, .chat_template = options->chat_template,
                                 .shutdown_timeout = std::chrono::seconds(static_cast<int64_t>(options->shutdown_timeout_s)),
                                 .api_key = options->api_key, .log_requests = options->log_requests});
      std::thread stopper([&] {
        int sig = 0;
        sigwait(&stop_signals, &sig);
        server.stop();
      });
      std::cerr << "aerie-serve: listening on http://" << options->host << ":" << options->port << ": " << name << " on " << d.device << " ("
                << d.dp_size << (d.enable_dp_attention ? " DP-attention group(s) over " : " replica(s) of ") << d.tp_size
                << " tensor-parallel rank(s)), KV pool " << deployment.kv_capacity_tokens() << " tokens, context "
                << config.max_position_embeddings << ", CUDA graphs "
                << (d.device != "cuda" || d.disable_cuda_graph
                        ? std::string("off")
                        : "up to batch " + std::to_string(d.cuda_graph_max_bs) +
                              (d.prefill_cuda_graph_max_tokens > 0 && !d.enable_dp_attention
                                   ? " and prefills of up to " + std::to_string(d.prefill_cuda_graph_max_tokens) + " tokens"
                                   : std::string()))
                << (d.speculative_algorithm.empty() ? std::string() : ", speculative " + d.speculative_algorithm) << "\n";
      try {
        server.listen();
      } catch (...) {
        pthread_kill(stopper.native_handle(), SIGTERM);
        stopper.join();
        throw;
      }
      stopper.join();
    }
    deployment.shutdown();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "aerie-serve: error: " << aerie::client_message(e) << "\n";
    return 2;
  }
}
