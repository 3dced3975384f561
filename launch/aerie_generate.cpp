// aerie-generate: offline generation through the engine's actors (Router -> Schedulers ->
// TargetWorkers), one JSON object per prompt. Under mpirun, every rank serves a replica and
// rank 0 prints the results.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "launch/deployment.hpp"
#include "launch/generate_options.hpp"
#include "model/config.hpp"
#include "model/tokenizer.hpp"

namespace {

using namespace aerie;

int run(const launch::GenerateOptions& o, parallel::ProcessGroup& world) {
  model::LlamaConfig config = o.model_path.empty() ? model::LlamaConfig::named_shape(o.model_shape)
                                                   : model::LlamaConfig::load(o.model_path);
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
  launch::DeploymentOptions d{.model_path = o.model_path, .load_format = o.load_format, .model_shape = o.model_shape,
                              .random_seed = o.random_seed, .device = o.device, .dtype = o.dtype,
                              .max_total_tokens = o.max_total_tokens > 0 ? o.max_total_tokens : needed, .page_size = o.page_size,
                              .max_running_requests = o.max_running_requests, .chunked_prefill_size = o.chunked_prefill_size,
                              .cuda_graph_max_bs = o.cuda_graph_max_bs, .disable_cuda_graph = o.disable_cuda_graph,
                              .tp_size = o.tp_size, .dp_size = o.dp_size};
  launch::Deployment deployment(d, world);
  if (!deployment.is_rank0()) {
    deployment.shutdown();  // serve until rank 0 is done
    return 0;
  }
  const auto outcomes = deployment.run(requests);
  deployment.shutdown();

  int status = 0;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& oc = outcomes[i];
    if (!oc.error.empty()) {
      std::cerr << "aerie-generate: prompt " << i << ": " << oc.error << "\n";
      std::cout << nlohmann::json{{"error", oc.error}}.dump() << "\n";
      status = 2;
      continue;
    }
    const bool from_text = i >= o.input_ids.size();
    if (o.output == "json") {
      nlohmann::json j;
      j["output_ids"] = oc.result.output_ids;
      if (from_text) j["text"] = tokenizer->decode(oc.result.output_ids);
      std::cout << j.dump() << "\n";
    } else if (from_text) {
      std::cout << tokenizer->decode(oc.result.output_ids) << "\n";
    } else {
      for (size_t t = 0; t < oc.result.output_ids.size(); ++t) std::cout << (t ? " " : "") << oc.result.output_ids[t];
      std::cout << "\n";
    }
  }
  std::cout.flush();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto options = aerie::launch::parse_generate_args(argc, argv);
    if (!options) return 0;
    auto world = aerie::parallel::make_process_group(&argc, &argv);
    return run(*options, *world);
  } catch (const std::exception& e) {
    std::cerr << "aerie-generate: error: " << e.what() << "\n";
    return 2;
  }
}
