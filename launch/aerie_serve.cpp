// aerie-serve: the engine as a long-running service. Rank 0 reads sglang /generate bodies as
// JSON lines on stdin and writes one result line per request (completion order) on stdout;
// under mpirun the other ranks serve their replicas until rank 0 reaches the end of input.
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "actors/frontend_actor.hpp"
#include "kernels/error.hpp"
#include "launch/json_request.hpp"
#include "launch/serve_options.hpp"
#include "model/config.hpp"

int main(int argc, char** argv) {
  using namespace aerie;
  try {
    auto options = launch::parse_serve_args(argc, argv);
    if (!options) return 0;
    auto world = parallel::make_process_group(&argc, &argv);
    launch::Deployment deployment(options->deployment, *world);
    if (!deployment.is_rank0()) {
      deployment.shutdown();
      return 0;
    }
    const auto& d = options->deployment;
    const auto config = d.model_path.empty() ? model::LlamaConfig::named_shape(d.model_shape) : model::LlamaConfig::load(d.model_path);
    std::cerr << "aerie-serve: ready (" << d.dp_size << " replica(s)); reading requests as JSON lines on stdin\n";
    std::mutex out_mu;
    auto write = [&out_mu](const std::string& line) {
      std::lock_guard<std::mutex> lock(out_mu);
      std::cout << line << std::endl;
    };
    auto parse = [vocab = config.vocab_size](const std::string& text) {
      nlohmann::json body;
      try {
        body = nlohmann::json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        AERIE_FAIL("malformed JSON: " << e.what());
      }
      auto p = launch::parse_generate_request(body, vocab);
      return std::pair{p.rid, std::move(p.request)};
    };
    auto frontend = deployment.system().spawn(actors::frontend_actor, deployment.router(), parse, write);
    std::string line;
    while (std::getline(std::cin, line))
      if (!line.empty()) caf::anon_send(frontend, actors::ClientLine{line});
    {
      caf::scoped_actor self{deployment.system()};
      self->request(frontend, caf::infinite, actors::DrainRequest{}).receive([](bool) {}, [](caf::error&) {});
      self->send_exit(frontend, caf::exit_reason::user_shutdown);
    }
    deployment.shutdown();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "aerie-serve: error: " << e.what() << "\n";
    return 2;
  }
}
