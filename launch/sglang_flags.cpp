#include "launch/sglang_flags.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::launch {

void add_sglang_flags(CLI::App& app, SglangFlags& f) {
  auto group = "sglang compatibility (accepted; see --help of each)";
  app.add_flag("--trust-remote-code", f.trust_remote_code, "accepted: Aerie runs no model code from the checkpoint")->group(group);
  app.add_flag("--skip-server-warmup", f.skip_server_warmup, "accepted: Aerie warms up (captures graphs) before it listens")->group(group);
  app.add_flag("--enable-metrics", f.enable_metrics, "accepted: GET /metrics is always on")->group(group);
  app.add_flag("--disable-radix-cache", f.disable_radix_cache, "accepted: Aerie keeps no prefix cache")->group(group);
  app.add_flag("--enable-mixed-chunk", f.enable_mixed_chunk, "accepted: prefill chunks and decodes always share a batch")->group(group);
  app.add_flag("--enable-torch-compile", f.enable_torch_compile, "accepted without effect (no PyTorch inside)")->group(group);
  app.add_flag("--enable-p2p-check", f.enable_p2p_check, "accepted: peer access is checked when the NVLink all-reduce starts")->group(group);
  app.add_option("--attention-backend", f.attention_backend, "accepted without effect: Aerie has its own attention kernels")->group(group);
  app.add_option("--sampling-backend", f.sampling_backend, "accepted without effect: Aerie has its own sampling kernels")->group(group);
  app.add_option("--tokenizer-mode", f.tokenizer_mode, "auto (the only mode)")->check(CLI::IsMember({"auto", "slow"}))->group(group);
  app.add_option("--schedule-policy", f.schedule_policy, "fcfs (others are accepted with a warning: Aerie schedules first come, first served)")
      ->group(group);
  app.add_option("--kv-cache-dtype", f.kv_cache_dtype, "auto: the activation dtype (fp8 is refused)")->group(group);
  app.add_option("--tokenizer-path", f.tokenizer_path, "must be --model-path (the tokenizer is read from the model)")->group(group);
  app.add_option("--grammar-backend", f.grammar_backend, "accepted: structured output is refused per request")->group(group);
  app.add_option("--stream-interval", f.stream_interval, "Aerie streams every iteration (1)")->check(CLI::PositiveNumber)->group(group);
  app.add_option("--cuda-graph-bs", f.cuda_graph_bs, "batch sizes to capture CUDA graphs for (instead of the bucket schedule)")
      ->group(group);
  auto refused = "sglang flags Aerie refuses unless left at their default";
  app.add_option("--quantization", f.quantization, "refused: load a bf16/f16/f32 checkpoint or a GGUF (dequantized at load)")->group(refused);
  app.add_option("--lora-paths", f.lora_paths, "refused: LoRA adapters are not supported")->group(refused);
  app.add_option("--tool-call-parser", f.tool_call_parser, "refused: tool calls are not supported")->group(refused);
  app.add_option("--reasoning-parser", f.reasoning_parser, "refused: reasoning parsers are not supported")->group(refused);
  app.add_option("--nnodes", f.nnodes, "1 (multi-node launches are not supported)")->group(refused);
  app.add_option("--node-rank", f.node_rank, "0")->group(refused);
  app.add_option("--dist-init-addr", f.dist_init_addr, "refused: ranks bootstrap over mpirun")->group(refused);
}

std::vector<std::string> check_sglang_flags(const SglangFlags& f, const std::string& model_path, std::vector<int64_t>& cuda_graph_bs,
                                            int64_t& cuda_graph_max_bs) {
  AERIE_CHECK(f.quantization.empty() || f.quantization == "none",
              "--quantization " << f.quantization << " is not supported: serve a bf16/f16/f32 checkpoint, or a GGUF (dequantized at load)");
  AERIE_CHECK(f.lora_paths.empty(), "--lora-paths: LoRA adapters are not supported");
  AERIE_CHECK(f.tool_call_parser.empty(), "--tool-call-parser: tool calls are not supported");
  AERIE_CHECK(f.reasoning_parser.empty(), "--reasoning-parser: reasoning parsers are not supported");
  AERIE_CHECK(f.nnodes == 1 && f.node_rank == 0 && f.dist_init_addr.empty(),
              "multi-node launches (--nnodes, --node-rank, --dist-init-addr) are not supported: start every rank with one mpirun");
  AERIE_CHECK(f.kv_cache_dtype == "auto" || f.kv_cache_dtype == "bf16" || f.kv_cache_dtype == "bfloat16",
              "--kv-cache-dtype " << f.kv_cache_dtype << " is not supported: the KV cache is kept in the activation dtype (auto)");
  AERIE_CHECK(f.tokenizer_path.empty() || f.tokenizer_path == model_path,
              "--tokenizer-path must be the --model-path (Aerie reads the tokenizer from the model)");
  std::vector<std::string> warnings;
  auto ignored = [&](bool given, const std::string& flag, const std::string& why) {
    if (given) warnings.push_back(flag + " is accepted but has no effect: " + why);
  };
  ignored(f.trust_remote_code, "--trust-remote-code", "Aerie runs no model code from the checkpoint");
  ignored(f.skip_server_warmup, "--skip-server-warmup", "Aerie warms up before it listens");
  ignored(f.enable_metrics, "--enable-metrics", "GET /metrics is always on");
  ignored(f.disable_radix_cache, "--disable-radix-cache", "Aerie keeps no prefix cache");
  ignored(f.enable_mixed_chunk, "--enable-mixed-chunk", "prefill chunks and decodes always share a batch");
  ignored(f.enable_torch_compile, "--enable-torch-compile", "there is no PyTorch inside");
  ignored(f.enable_p2p_check, "--enable-p2p-check", "peer access is checked when the NVLink all-reduce starts");
  ignored(!f.attention_backend.empty(), "--attention-backend " + f.attention_backend, "Aerie uses its own attention kernels");
  ignored(!f.sampling_backend.empty(), "--sampling-backend " + f.sampling_backend, "Aerie uses its own sampling kernels");
  ignored(f.tokenizer_mode != "auto", "--tokenizer-mode " + f.tokenizer_mode, "Aerie has one tokenizer implementation");
  ignored(f.schedule_policy != "fcfs", "--schedule-policy " + f.schedule_policy, "Aerie schedules first come, first served");
  ignored(!f.grammar_backend.empty(), "--grammar-backend " + f.grammar_backend, "structured output is refused per request");
  ignored(f.stream_interval != 1, "--stream-interval " + std::to_string(f.stream_interval), "Aerie streams every iteration");
  if (!f.cuda_graph_bs.empty()) {  // exactly these sizes, as sglang captures them
    for (int64_t b : f.cuda_graph_bs) AERIE_CHECK(b >= 1, "--cuda-graph-bs needs batch sizes >= 1, got " << b);
    cuda_graph_bs = f.cuda_graph_bs;
    cuda_graph_max_bs = *std::max_element(f.cuda_graph_bs.begin(), f.cuda_graph_bs.end());
  }
  return warnings;
}

}  // namespace aerie::launch
