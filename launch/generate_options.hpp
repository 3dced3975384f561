#pragma once
// Command line of aerie-generate, parsed into plain options (testable without running).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/generation_request.hpp"
#include "launch/deployment.hpp"

namespace aerie::launch {

struct GenerateOptions {
  DeploymentOptions deployment;  // model, memory, parallelism (max_total_tokens 0: what the prompts need)
  std::vector<std::vector<int32_t>> input_ids;
  std::vector<std::string> prompts;
  bool chat = false;              // each --prompt is a user message, rendered by the model's chat template
  std::string chat_template;      // --chat-template: a .jinja file or built-in name (default: the model's)
  int64_t max_new_tokens = 128;
  core::SamplingOptions sampling;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::string output = "json";  // json | text
  bool graph_times = false;     // --graph-times: time each graph runner's work and the speculative stages, print them
};

// Parses argv; throws aerie::Error with a clear message on bad input. Returns nothing
// when --help was asked (the help text is printed).
std::optional<GenerateOptions> parse_generate_args(int argc, const char* const* argv);

// "1,5,7" -> {1, 5, 7}; throws on anything that is not a comma-separated list of ints.
std::vector<int32_t> parse_id_list(const std::string& text);

// The prompts of an --input-ids-file: one per line, comma-separated token ids as --input-ids
// takes them; blank lines are skipped. Throws naming the file and line of anything else.
std::vector<std::vector<int32_t>> read_id_file(const std::string& path);

}  // namespace aerie::launch
