#include "launch/serve_options.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "kernels/error.hpp"

namespace aerie::launch {

std::optional<ServeOptions> parse_serve_args(int argc, const char* const* argv) {
  ServeOptions s;
  auto& d = s.deployment;
  CLI::App app{"aerie-serve: the Aerie engine as a service. Under mpirun, every rank serves a replica (--dp-size) and rank 0\n"
               "runs the Router, the Schedulers and the HTTP API (GET /health, /health_generate, /get_server_info,\n"
               "/v1/models; POST /generate with sglang's body). With --stdin-json, /generate bodies are read as JSON lines\n"
               "on stdin and each result is one JSON line on stdout."};
  app.add_option("--model-path", d.model_path, "Hugging Face model folder");
  app.add_option("--load-format", d.load_format, "auto or dummy")->check(CLI::IsMember({"auto", "dummy"}));
  app.add_option("--model-shape", d.model_shape, "with dummy weights and no --model-path: tiny, llama-3.2-1b, llama-3.1-8b");
  app.add_option("--random-seed", d.random_seed, "seed of dummy weights");
  app.add_option("--device", d.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", d.dtype, "auto, f32, bf16, f16")->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "float32", "bfloat16", "float16"}));
  app.add_option("--tp-size", d.tp_size, "tensor-parallel ranks per DP group")->check(CLI::PositiveNumber);
  app.add_option("--dp-size", d.dp_size, "data-parallel replicas")->check(CLI::PositiveNumber);
  app.add_option("--max-running-requests", d.max_running_requests, "requests decoded together per replica")->check(CLI::PositiveNumber);
  app.add_option("--max-total-tokens", d.max_total_tokens, "KV pool size in tokens per replica (default: from the memory budget)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mem-fraction-static", d.mem_fraction_static, "CUDA: share of device memory for weights + KV pool")
      ->check(CLI::Range(0.01, 0.99));
  app.add_option("--chunked-prefill-size", d.chunked_prefill_size, "prompt tokens per iteration")->check(CLI::PositiveNumber);
  app.add_option("--page-size", d.page_size, "tokens per KV page")->check(CLI::PositiveNumber);
  app.add_option("--cuda-graph-max-bs", d.cuda_graph_max_bs, "capture decode CUDA graphs up to this batch size")->check(CLI::PositiveNumber);
  app.add_flag("--disable-cuda-graph", d.disable_cuda_graph, "run every step eagerly");
  app.add_option("--host", s.host, "address the HTTP API listens on");
  app.add_option("--port", s.port, "port of the HTTP API")->check(CLI::Range(1, 65535));
  app.add_option("--served-model-name", s.served_model_name, "the model id /v1/models reports");
  app.add_flag("--stdin-json", s.stdin_json, "read requests as JSON lines on stdin instead of serving HTTP");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    AERIE_FAIL(e.what() << " (see --help)");
  }
  AERIE_CHECK(d.load_format == "dummy" || !d.model_path.empty(), "--model-path is required unless --load-format dummy");
  return s;
}

}  // namespace aerie::launch
