#include "launch/cli_checks.hpp"
#include "launch/generate_options.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <fstream>
#include <iterator>
#include <iostream>

#include "kernels/error.hpp"
#include "launch/deployment_flags.hpp"

namespace aerie::launch {

std::vector<int32_t> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  AERIE_CHECK(!text.empty(), "--input-ids needs a comma-separated list of token ids, got an empty string");
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    int32_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    AERIE_CHECK(!item.empty() && ec == std::errc() && end == item.data() + item.size() && v >= 0,
                "--input-ids: '" << item << "' is not a non-negative token id (in '" << text << "')");
    ids.push_back(v);
    pos = comma + 1;
  }
  return ids;
}

std::vector<std::vector<int32_t>> read_id_file(const std::string& path) {
  std::ifstream in(path);
  AERIE_CHECK(in, "--input-ids-file: cannot read '" << path << "'");
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      prompts.push_back(parse_id_list(line));
    } catch (const Error& e) {
      AERIE_FAIL("--input-ids-file " << path << ", line " << number << ": " << e.message());
    }
  }
  AERIE_CHECK(!in.bad(), "--input-ids-file: reading '" << path << "' failed");
  return prompts;
}

std::optional<GenerateOptions> parse_generate_args(int argc, const char* const* argv) {
  GenerateOptions o;
  CLI::App app{"aerie-generate: offline generation for one or many prompts in one batch.\n"
               "Prints one JSON object per prompt on stdout: {\"output_ids\": [...]}."};
  app.option_defaults()->always_capture_default();  // --help shows every default
  std::vector<std::string> id_lists;
  add_deployment_flags(app, o.deployment, "default: what the prompts need");
  app.add_option("--input-ids", id_lists, "a prompt as comma-separated token ids (repeat for a batch)")->take_all();
  std::string id_file;
  app.add_option("--input-ids-file", id_file,
                 "prompts as token ids, one per line (comma-separated, as --input-ids; for batches too many for a command line); "
                 "they follow the --input-ids ones, and their outputs too");
  app.add_option("--prompt", o.prompts, "a text prompt (needs the model's tokenizer: GGUF, tokenizer.json or tokenizer.model; repeatable)");
  app.add_flag("--chat", o.chat, "send each --prompt as a user message through the model's chat template (as /v1/chat/completions does)");
  app.add_option("--chat-template", o.chat_template, "with --chat: a .jinja file or a built-in (llama-3, llama-2, chatml, plain) instead of the model's");
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate per prompt")->check(launch::kPositive);
  app.add_option("--temperature", o.sampling.temperature, "0 = greedy");
  app.add_option("--top-p", o.sampling.top_p, "nucleus sampling mass, in (0, 1]");
  app.add_option("--top-k", o.sampling.top_k, "keep the k most likely tokens (<= 0: all)");
  app.add_option("--min-p", o.sampling.min_p, "drop tokens below min_p * the top probability");
  app.add_option("--seed", o.sampling.seed, "sampling seed");
  app.add_option("--frequency-penalty", o.sampling.frequency_penalty, "subtract this times each output token's count from its logit, in [-2, 2]");
  app.add_option("--presence-penalty", o.sampling.presence_penalty, "subtract this from the logit of every token already output, in [-2, 2]");
  app.add_option("--repetition-penalty", o.sampling.repetition_penalty,
                 "divide positive (multiply negative) logits of prompt and output tokens by this, in (0, 2] (transformers' rule)");
  app.add_option("--min-new-tokens", o.sampling.min_new_tokens, "no EOS or stop id before this many output tokens");
  std::vector<std::string> biases;
  app.add_option("--logit-bias", biases, "ID:BIAS added to a token's logit before sampling (repeatable), bias in [-100, 100]");
  app.add_option("--stop-token-ids", o.stop_token_ids, "extra ids that end generation")->delimiter(',');
  app.add_flag("--ignore-eos", o.ignore_eos, "do not stop at the model's EOS ids");
  app.add_flag("--graph-times", o.graph_times,
               "after the run, print the device time of each CUDA-graph runner (two events around every replay) and of the "
               "target's and the draft's forwards outside the graphs (\"(eager)\"), the device's time between one runner's work "
               "and the next's, and, with speculative decoding, the worker's time a round in each stage and the host's time "
               "between back-to-back rounds outside the worker (for measuring: the events cost a little)");
  app.add_option("--output", o.output, "json (one object per prompt) or text")->check(CLI::IsMember({"json", "text"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    AERIE_FAIL(e.what() << " (see --help)");
  }
  for (const auto& s : id_lists) o.input_ids.push_back(parse_id_list(s));
  if (!id_file.empty()) {
    auto from_file = read_id_file(id_file);
    AERIE_CHECK(!from_file.empty(), "--input-ids-file " << id_file << ": no prompt in it");
    o.input_ids.insert(o.input_ids.end(), std::make_move_iterator(from_file.begin()), std::make_move_iterator(from_file.end()));
  }
  for (const auto& b : biases) {
    const auto colon = b.find(':');
    AERIE_CHECK(colon != std::string::npos, "--logit-bias wants ID:BIAS, got '" << b << "'");
    try {
      o.sampling.logit_bias.emplace_back(static_cast<int32_t>(std::stol(b.substr(0, colon))), std::stof(b.substr(colon + 1)));
    } catch (const std::exception&) {
      AERIE_FAIL("--logit-bias wants ID:BIAS, got '" << b << "'");
    }
  }
  AERIE_CHECK(!o.input_ids.empty() || !o.prompts.empty(), "give at least one --input-ids, --input-ids-file or --prompt");
  check_deployment_flags(o.deployment);
  o.sampling.validate();
  return o;
}

}  // namespace aerie::launch
