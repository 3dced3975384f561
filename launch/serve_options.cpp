#include "launch/serve_options.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "kernels/error.hpp"
#include "launch/deployment_flags.hpp"

namespace aerie::launch {

std::optional<ServeOptions> parse_serve_args(int argc, const char* const* argv) {
  ServeOptions s;
  auto& d = s.deployment;
  CLI::App app{"aerie-serve: the Aerie engine as a service. Under mpirun, every rank serves a replica (--dp-size) and rank 0\n"
               "runs the Router, the Schedulers and the HTTP API: sglang's POST /generate, /abort_request, /flush_cache and\n"
               "GET /health, /health_generate, /get_server_info, /get_model_info; OpenAI's POST /v1/completions,\n"
               "/v1/chat/completions and GET /v1/models; Prometheus GET /metrics. With --stdin-json, /generate bodies\n"
               "are read as JSON lines on stdin and each result is one JSON line on stdout."};
  app.option_defaults()->always_capture_default();  // --help shows every default
  add_deployment_flags(app, d, "default: from the memory budget");
  app.add_option("--host", s.host, "address the HTTP API listens on");
  app.add_option("--port", s.port, "port of the HTTP API")->check(CLI::Range(1, 65535));
  app.add_option("--served-model-name", s.served_model_name, "the model id /v1/models reports");
  app.add_option("--chat-template", s.chat_template,
                 "Jinja chat template for /v1/chat/completions: a .jinja file or a built-in (llama-3, llama-2, chatml, plain); "
                 "default: the model's own (chat_template.jinja, tokenizer_config.json or GGUF metadata), else plain");
  app.add_flag("--stdin-json", s.stdin_json, "read requests as JSON lines on stdin instead of serving HTTP");
  app.add_option("--api-key", s.api_key, "require 'Authorization: Bearer <key>' on every endpoint but GET /health");
  app.add_flag("--log-requests", s.log_requests, "log one line per finished request (at info level, which this turns on)");
  add_sglang_flags(app, s.sglang);
  app.add_option("--shutdown-timeout", s.shutdown_timeout_s,
                 "on SIGTERM/SIGINT: refuse new requests (503) and give those in flight this many seconds to finish")
      ->check(CLI::Range(0.0, 86400.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    AERIE_FAIL(e.what() << " (see --help)");
  }
  check_deployment_flags(d);
  s.warnings = check_sglang_flags(s.sglang, d.model_path, d.cuda_graph_bs, d.cuda_graph_max_bs);
  if (s.log_requests && (d.log_level.empty() || d.log_level == "warning" || d.log_level == "error")) d.log_level = "info";
  return s;
}

}  // namespace aerie::launch
