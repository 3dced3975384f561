#include "launch/deployment_flags.hpp"

#include "kernels/error.hpp"

namespace aerie::launch {

void add_deployment_flags(CLI::App& app, DeploymentOptions& d, const std::string& max_total_tokens_help) {
  app.add_option("--model-path", d.model_path, "Hugging Face model folder (config.json + safetensors)");
  app.add_option("--load-format", d.load_format, "auto: read the checkpoint; dummy: seeded random weights")
      ->check(CLI::IsMember({"auto", "dummy"}));
  app.add_option("--model-shape", d.model_shape, "with --load-format dummy and no --model-path: tiny, llama-3.2-1b, llama-3.1-8b");
  app.add_option("--random-seed", d.random_seed, "seed of the dummy weights");
  app.add_option("--device", d.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", d.dtype, "weight dtype: auto (the checkpoint's), f32, bf16, f16")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "float32", "bfloat16", "float16"}));
  app.add_option("--tp-size", d.tp_size, "tensor-parallel ranks per DP group")->check(CLI::PositiveNumber);
  app.add_option("--dp-size", d.dp_size, "data-parallel replicas (one Scheduler each; under mpirun)")->check(CLI::PositiveNumber);
  app.add_option("--max-running-requests", d.max_running_requests, "requests decoded together per replica")->check(CLI::PositiveNumber);
  app.add_option("--max-total-tokens", d.max_total_tokens, "KV pool size in tokens per replica (" + max_total_tokens_help + ")")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mem-fraction-static", d.mem_fraction_static, "CUDA: share of device memory for weights + KV pool")
      ->check(CLI::Range(0.01, 0.99));
  app.add_option("--chunked-prefill-size", d.chunked_prefill_size, "prompt tokens per iteration (longer prompts are chunked)")
      ->check(CLI::PositiveNumber);
  app.add_option("--page-size", d.page_size, "tokens per KV page")->check(CLI::PositiveNumber);
  app.add_option("--cuda-graph-max-bs", d.cuda_graph_max_bs, "capture decode CUDA graphs up to this batch size")->check(CLI::PositiveNumber);
  app.add_flag("--disable-cuda-graph", d.disable_cuda_graph, "run every step eagerly");
}

void check_deployment_flags(const DeploymentOptions& d) {
  AERIE_CHECK(d.load_format == "dummy" || !d.model_path.empty(), "--model-path is required unless --load-format dummy");
}

}  // namespace aerie::launch
