#pragma once
// sglang's launch lines, taken as they are: the ServerArgs flags a Llama deployment uses that
// are not Aerie's own, each either honoured, accepted with a one-line warning (a feature that
// does not apply: --trust-remote-code, --skip-server-warmup, --disable-radix-cache, ...), or
// refused with what is unsupported (--quantization, --lora-paths, multi-node, fp8 KV, ...).
// Aerie's own flags already carry sglang's names (and its aliases --tp, --dp, --model).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace aerie::launch {

struct SglangFlags {
  // Accepted, without effect beyond a warning (or an explanation at info level).
  bool trust_remote_code = false, skip_server_warmup = false, enable_metrics = false, disable_radix_cache = false;
  bool enable_mixed_chunk = false, enable_torch_compile = false, enable_p2p_check = false;
  std::string attention_backend, sampling_backend, tokenizer_mode = "auto", schedule_policy = "fcfs", kv_cache_dtype = "auto";
  std::string tokenizer_path, grammar_backend;
  int stream_interval = 1;
  std::vector<int64_t> cuda_graph_bs;
  // Refused unless left at their default.
  std::string quantization, tool_call_parser, reasoning_parser, dist_init_addr;
  std::vector<std::string> lora_paths;
  int nnodes = 1, node_rank = 0;
};

void add_sglang_flags(CLI::App& app, SglangFlags& f);
// After parsing: throws aerie::Error for a refused flag; returns the warnings for the flags
// accepted without effect (the caller logs them). model_path: Aerie's --model-path, which
// --tokenizer-path must match. cuda_graph_bs / cuda_graph_max_bs: set from --cuda-graph-bs when
// given (those sizes, and the largest as the cap).
std::vector<std::string> check_sglang_flags(const SglangFlags& f, const std::string& model_path, std::vector<int64_t>& cuda_graph_bs,
                                            int64_t& cuda_graph_max_bs);

}  // namespace aerie::launch
