// aerie-generate: offline generation through the engine's actors (Router -> Schedulers ->
// TargetWorkers), one JSON object per prompt. Under mpirun, every rank serves a replica and
// rank 0 prints the results.
#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "actors/messages.hpp"
#include "kernels/error.hpp"
#include "launch/deployment.hpp"
#include "launch/generate_options.hpp"
#include "launch/serving/chat_template.hpp"
#include "model/config.hpp"
#include "model/text_tokenizer.hpp"
#include "spec/graph_times.hpp"

namespace {

using namespace aerie;

// The engine's counters after a run (the Router sums its Schedulers'); nothing if it does not
// answer within 5 s.
std::optional<actors::LoadReport> engine_load(launch::Deployment& deployment) {
  std::optional<actors::LoadReport> load;
  caf::scoped_actor self{deployment.system()};
  self->request(deployment.router(), std::chrono::seconds(5), actors::GetLoad{})
      .receive([&](actors::LoadReport& r) { load = r; }, [](caf::error&) {});
  return load;
}

// --graph-times: the device time of each graph runner's work, the device's time between two
// runners' work (idle, or work outside the runners), and the speculative worker's wall time a
// round in each stage.
void print_graph_times(const std::optional<core::SpecStageTimes>& stages) {
  std::map<std::string, spec::GraphGap> gaps;
  for (const auto& [label, t] : spec::GraphTimes::collect(&gaps))
    std::cerr << "aerie-generate: graph " << label << ": " << t.runs << " runs, " << (t.runs ? t.ms / static_cast<double>(t.runs) : 0.0)
              << " ms a run\n";
  for (const auto& [between, g] : gaps)
    std::cerr << "aerie-generate: gap " << between << ": " << g.count << " times, median " << g.median_ms << " ms, mean " << g.mean_ms
              << " ms\n";
  if (!stages || stages->rounds == 0) return;
  const auto per_round = [&](double ms) { return ms / static_cast<double>(stages->rounds); };
  std::cerr << "aerie-generate: speculative stages, ms a round (" << stages->rounds << " rounds): propose " << per_round(stages->propose_ms)
            << ", verify " << per_round(stages->verify_ms) << ", accept " << per_round(stages->accept_ms) << ", extend "
            << per_round(stages->extend_ms) << "; " << stages->chains_drafted_ahead << " of the rounds read a chain drafted ahead\n";
  if (stages->turnarounds > 0) {
    std::cerr << "aerie-generate: host time between back-to-back rounds, outside the speculative worker: "
              << stages->turnaround_ms / static_cast<double>(stages->turnarounds) << " ms a round (" << stages->turnarounds << "), longest "
              << stages->turnaround_max_ms << " ms; by length:";
    const auto& edges = core::SpecStageTimes::kTurnaroundEdgesMs;
    for (size_t b = 0; b < stages->turnaround_buckets.size(); ++b) {
      const double share = 100.0 * static_cast<double>(stages->turnaround_buckets[b]) / static_cast<double>(stages->turnarounds);
      if (b == 0) std::cerr << " under " << edges[0] * 1e3 << " us " << share << "%,";
      else if (b < edges.size()) std::cerr << " " << edges[b - 1] * 1e3 << "-" << edges[b] * 1e3 << " us " << share << "%,";
      else std::cerr << " " << edges.back() * 1e3 << " us and more " << share << "%\n";
    }
  }
}

int run(const launch::GenerateOptions& o, parallel::ProcessGroup& world) {
  const std::string& model_path = o.deployment.model_path;
  // The tokenizer (and the BOS id it adds) is needed before the deployment: the prompts
  // size its default KV pool.
  model::LlamaConfig config = model_path.empty() ? model::LlamaConfig::named_shape(o.deployment.model_shape)
                                                 : model::LlamaConfig::load(model_path);
  std::unique_ptr<model::TextTokenizer> tokenizer;
  if (!o.prompts.empty()) {
    AERIE_CHECK(!model_path.empty(), "--prompt needs --model-path with a tokenizer (GGUF, tokenizer.json or tokenizer.model)");
    tokenizer = model::load_text_tokenizer(model_path);
    AERIE_CHECK(tokenizer, model_path << ": no tokenizer (tokenizer.json or tokenizer.model) for --prompt");
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
  std::optional<launch::ChatTemplate> chat;
  if (o.chat) {
    AERIE_CHECK(tokenizer, "--chat needs --prompt");
    auto text_of = [&](int32_t id) { return id >= 0 ? tokenizer->token_text(id) : std::string(); };
    chat.emplace(launch::find_chat_template(o.chat_template, model_path), *tokenizer, text_of(config.bos_token_id),
                 text_of(config.eos_token_ids.empty() ? -1 : config.eos_token_ids.front()));
  }
  for (const auto& p : o.prompts) {
    if (!chat) {
      add(tokenizer->encode(p));
      continue;
    }
    add(chat->render({{"user", p}}));
    const auto stops = chat->stop_token_ids();  // the end of the assistant's turn
    requests.back().stop_token_ids.insert(requests.back().stop_token_ids.end(), stops.begin(), stops.end());
  }

  int64_t needed = 0;
  // A speculative verify also holds its draft positions and one more.
  const int64_t spec_extra = o.deployment.speculative_algorithm.empty() ? 0 : o.deployment.speculative_num_steps + 1;
  for (const auto& r : requests) needed += static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens + spec_extra;
  launch::DeploymentOptions d = o.deployment;
  if (d.max_total_tokens == 0) d.max_total_tokens = needed;
  launch::Deployment deployment(d, world);
  if (!deployment.is_rank0()) {
    deployment.shutdown();  // serve until rank 0 is done
    return 0;
  }
  if (o.graph_times) spec::GraphTimes::enable(true);
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = deployment.run(requests);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::optional<actors::LoadReport> load = engine_load(deployment);
  const std::optional<core::SpecStageTimes> stages = deployment.spec_stage_times();
  deployment.shutdown();
  {  // One summary line on stderr (benchmark scripts read it): prefill and decode, load excluded.
    int64_t out_tokens = 0, verifies = 0;
    for (const auto& oc : outcomes) out_tokens += static_cast<int64_t>(oc.result.output_ids.size()), verifies += oc.result.spec_verify_ct;
    std::cerr << "aerie-generate: " << outcomes.size() << " requests, " << out_tokens << " output tokens in " << seconds << " s ("
              << (seconds > 0 ? static_cast<double>(out_tokens) / seconds : 0.0) << " tok/s)";
    if (verifies > 0) std::cerr << ", " << verifies << " verify forwards (" << static_cast<double>(out_tokens) / static_cast<double>(verifies) << " tokens per verify)";
    std::cerr << "\n";
    // Where the wall time went: the device busy with the batches, idle between them (the
    // Scheduler's and actors' turnaround that overlap scheduling hides). Measured on the target
    // worker's stream from each batch's first copy to its tokens: with speculative decoding the
    // draft work a round leaves behind (its extend and, drafting ahead, the next chain) runs
    // "between" batches.
    if (load && load->forward_batches > 0) {
      const auto per_batch_ms = [&](double s) { return s * 1e3 / static_cast<double>(load->forward_batches); };
      std::cerr << "aerie-generate: " << load->forward_batches << " batches, the device busy " << load->forward_seconds << " s ("
                << per_batch_ms(load->forward_seconds) << " ms a batch) and idle " << load->forward_gap_seconds << " s between them ("
                << per_batch_ms(load->forward_gap_seconds) << " ms a batch)\n";
    }
    if (o.graph_times) print_graph_times(stages);
  }

  int status = 0;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& oc = outcomes[i];
    // A request the engine failed after it started (a failed batch) ends with the reason "error: ...".
    const std::string& reason = oc.result.finish_reason;
    const std::string error = !oc.error.empty() ? oc.error : reason.rfind("error", 0) == 0 ? reason : "";
    if (!error.empty()) {
      std::cerr << "aerie-generate: prompt " << i << ": " << error << "\n";
      std::cout << nlohmann::json{{"error", error}}.dump() << "\n";
      status = 2;
      continue;
    }
    const bool from_text = i >= o.input_ids.size();
    if (o.output == "json") {
      nlohmann::json j;
      j["output_ids"] = oc.result.output_ids;
      // Target verify forwards of speculative decoding (present when it is on, as sglang's meta_info).
      if (!o.deployment.speculative_algorithm.empty()) j["spec_verify_ct"] = oc.result.spec_verify_ct;
      if (from_text) j["text"] = tokenizer->decode_output(oc.result.output_ids);  // special tokens left out, as sglang
      // Generated bytes need not be valid UTF-8: replace what is not (U+FFFD).
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else if (from_text) {
      std::cout << tokenizer->decode_output(oc.result.output_ids) << "\n";
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
    std::cerr << "aerie-generate: error: " << aerie::client_message(e) << "\n";
    return 2;
  }
}
