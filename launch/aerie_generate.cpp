// aerie-generate: offline generation through the engine, one JSON object per prompt.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "actors/core/generation_engine.hpp"
#include "kernels/buffer.hpp"
#include "kernels/error.hpp"
#include "kernels/staging.hpp"
#include "launch/generate_options.hpp"
#include "model/tokenizer.hpp"

namespace {

using namespace aerie;

int run(const launch::GenerateOptions& o) {
  const Device device = parse_device(o.device);
  AERIE_CHECK(device == Device::kCpu || cuda_available(), "--device cuda: no usable CUDA device in this process");
  model::LlamaConfig config = o.model_path.empty() ? model::LlamaConfig::named_shape(o.model_shape)
                                                   : model::LlamaConfig::load(o.model_path);
  const DType weight_dtype = o.dtype == "auto" ? config.dtype : parse_dtype(o.dtype);
  // The CPU reference computes in fp32 whatever the weights are stored in.
  const DType act_dtype = device == Device::kCpu ? DType::kF32 : weight_dtype;
  model::LlamaWeights weights = o.load_format == "dummy"
                                    ? model::random_llama_weights(config, o.random_seed, device, weight_dtype)
                                    : model::load_llama_weights(o.model_path, config, device, weight_dtype);

  std::unique_ptr<model::Tokenizer> tokenizer;
  if (!o.prompts.empty()) {
    AERIE_CHECK(!o.model_path.empty(), "--prompt needs --model-path with a tokenizer.model");
    tokenizer = std::make_unique<model::Tokenizer>(o.model_path, config.bos_token_id);
  }
  std::vector<core::GenerationRequest> requests;
  auto add = [&](std::vector<int32_t> ids) {
    core::GenerationRequest r;
    r.prompt = std::move(ids);
    r.sampling = o.sampling;
    r.max_new_tokens = o.max_new_tokens;
    r.stop_token_ids = o.stop_token_ids;
    r.ignore_eos = o.ignore_eos;
    requests.push_back(std::move(r));
  };
  for (const auto& ids : o.input_ids) add(ids);
  for (const auto& p : o.prompts) add(tokenizer->encode(p));

  int64_t needed = 0;
  for (const auto& r : requests) needed += static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens;
  const int64_t pool_tokens = o.max_total_tokens > 0 ? o.max_total_tokens : needed;
  model::KvCache kv(config, model::kv_shape_for_tokens(pool_tokens, o.page_size), device, act_dtype);
  OwnedStream stream(device);
  model::LlamaModel llama(config, std::move(weights), stream.get(), act_dtype);
  core::GenerationEngine engine(llama, kv, {.max_running_requests = o.max_running_requests,
                                            .cuda_graph_max_bs = o.disable_cuda_graph ? 0 : o.cuda_graph_max_bs});
  const auto results = engine.generate(requests);

  for (size_t i = 0; i < results.size(); ++i) {
    const auto& res = results[i];
    const bool from_text = i >= o.input_ids.size();
    if (o.output == "json") {
      nlohmann::json j;
      j["output_ids"] = res.output_ids;
      if (from_text) j["text"] = tokenizer->decode(res.output_ids);
      std::cout << j.dump() << "\n";
    } else if (from_text) {
      std::cout << tokenizer->decode(res.output_ids) << "\n";
    } else {
      for (size_t t = 0; t < res.output_ids.size(); ++t) std::cout << (t ? " " : "") << res.output_ids[t];
      std::cout << "\n";
    }
  }
  std::cout.flush();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto options = aerie::launch::parse_generate_args(argc, argv);
    if (!options) return 0;
    return run(*options);
  } catch (const std::exception& e) {
    std::cerr << "aerie-generate: error: " << e.what() << "\n";
    return 2;
  }
}
