#include "launch/generate_options.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>

#include "kernels/error.hpp"

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

std::optional<GenerateOptions> parse_generate_args(int argc, const char* const* argv) {
  GenerateOptions o;
  CLI::App app{"aerie-generate: offline generation for one or many prompts in one batch.\n"
               "Prints one JSON object per prompt on stdout: {\"output_ids\": [...]}."};
  std::vector<std::string> id_lists;
  app.add_option("--model-path", o.model_path, "Hugging Face model folder (config.json + safetensors)");
  app.add_option("--load-format", o.load_format, "auto: read the checkpoint; dummy: seeded random weights")
      ->check(CLI::IsMember({"auto", "dummy"}));
  app.add_option("--model-shape", o.model_shape, "with --load-format dummy and no --model-path: tiny, llama-3.2-1b, llama-3.1-8b");
  app.add_option("--random-seed", o.random_seed, "seed of the dummy weights");
  app.add_option("--input-ids", id_lists, "a prompt as comma-separated token ids (repeat for a batch)")->take_all();
  app.add_option("--prompt", o.prompts, "a text prompt (needs tokenizer.json or tokenizer.model in the model folder; repeatable)");
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens to generate per prompt")->check(CLI::PositiveNumber);
  app.add_option("--temperature", o.sampling.temperature, "0 = greedy");
  app.add_option("--top-p", o.sampling.top_p, "nucleus sampling mass, in (0, 1]");
  app.add_option("--top-k", o.sampling.top_k, "keep the k most likely tokens (<= 0: all)");
  app.add_option("--min-p", o.sampling.min_p, "drop tokens below min_p * the top probability");
  app.add_option("--seed", o.sampling.seed, "sampling seed");
  app.add_option("--stop-token-ids", o.stop_token_ids, "extra ids that end generation")->delimiter(',');
  app.add_flag("--ignore-eos", o.ignore_eos, "do not stop at the model's EOS ids");
  app.add_option("--device", o.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--dtype", o.dtype, "weight dtype: auto (the checkpoint's), f32, bf16, f16")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "float32", "bfloat16", "float16"}));
  app.add_option("--output", o.output, "json (one object per prompt) or text")->check(CLI::IsMember({"json", "text"}));
  app.add_option("--max-total-tokens", o.max_total_tokens, "KV pool size in tokens (default: what the prompts need)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--page-size", o.page_size, "tokens per KV page")->check(CLI::PositiveNumber);
  app.add_option("--max-running-requests", o.max_running_requests, "requests decoded together at most")
      ->check(CLI::PositiveNumber);
  app.add_option("--cuda-graph-max-bs", o.cuda_graph_max_bs, "capture decode CUDA graphs for batch sizes up to this")
      ->check(CLI::PositiveNumber);
  app.add_flag("--disable-cuda-graph", o.disable_cuda_graph, "run every step eagerly");
  app.add_option("--chunked-prefill-size", o.chunked_prefill_size, "prompt tokens per iteration (longer prompts are chunked)")
      ->check(CLI::PositiveNumber);
  app.add_option("--tp-size", o.tp_size, "tensor-parallel ranks per DP group")->check(CLI::PositiveNumber);
  app.add_option("--dp-size", o.dp_size, "data-parallel replicas (one Scheduler each; under mpirun)")->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    AERIE_FAIL(e.what() << " (see --help)");
  }
  for (const auto& s : id_lists) o.input_ids.push_back(parse_id_list(s));
  AERIE_CHECK(!o.input_ids.empty() || !o.prompts.empty(), "give at least one --input-ids or --prompt");
  AERIE_CHECK(o.load_format == "dummy" || !o.model_path.empty(), "--model-path is required unless --load-format dummy");
  o.sampling.validate();
  return o;
}

}  // namespace aerie::launch
