#pragma once
// Command line of aerie-generate, parsed into plain options (testable without running).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/generation_request.hpp"

namespace aerie::launch {

struct GenerateOptions {
  std::string model_path;               // empty with --load-format dummy: use model_shape
  std::string load_format = "auto";     // auto | dummy
  std::string model_shape = "tiny";     // for dummy weights without a model folder
  uint64_t random_seed = 0;             // dummy weights
  std::vector<std::vector<int32_t>> input_ids;
  std::vector<std::string> prompts;
  int64_t max_new_tokens = 128;
  core::SamplingOptions sampling;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::string device = "cpu";
  std::string dtype = "auto";           // weights (and activations on CUDA)
  std::string output = "json";          // json | text
  int64_t max_total_tokens = 0;         // KV pool size in tokens; 0 = what the prompts need
  int64_t page_size = 1;
  int64_t max_running_requests = 256;
  int64_t cuda_graph_max_bs = 256;      // decode graphs for batches up to this size (CUDA)
  bool disable_cuda_graph = false;
  int64_t chunked_prefill_size = 8192;  // prompt tokens per iteration
  int64_t tp_size = 1;
  int64_t dp_size = 1;
};

// Parses argv; throws aerie::Error with a clear message on bad input. Returns nothing
// when --help was asked (the help text is printed).
std::optional<GenerateOptions> parse_generate_args(int argc, const char* const* argv);

// "1,5,7" -> {1, 5, 7}; throws on anything that is not a comma-separated list of ints.
std::vector<int32_t> parse_id_list(const std::string& text);

}  // namespace aerie::launch
