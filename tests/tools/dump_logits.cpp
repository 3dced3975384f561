// aerie-dump-logits: teacher-forced logits of every position of one prompt, as JSON
// ({"logits": [[...], ...]}), for the fidelity tests against transformers.
//   aerie-dump-logits MODEL_DIR 1,5,7 [CHUNK [cpu|cuda]]
// With CHUNK, the prompt is fed in pieces of that many tokens (extend over a cache that
// already holds the earlier pieces), which must give the same logits. On cuda the model
// runs in bf16; on cpu in fp32. Under `mpirun -np T` the model runs tensor-parallel over
// the T ranks (one GPU each) and rank 0 prints.
#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "launch/generate_options.hpp"
#include "launch/tp_context.hpp"
#include "kernels/staging.hpp"
#include "model/llama_model.hpp"

int main(int argc, char** argv) {
  using namespace aerie;
  try {
    AERIE_CHECK(argc >= 3 && argc <= 5, "usage: aerie-dump-logits MODEL_DIR IDS [CHUNK [cpu|cuda]]");
    const std::string dir = argv[1];
    const auto ids = launch::parse_id_list(argv[2]);
    const int64_t n = static_cast<int64_t>(ids.size());
    const int64_t chunk = argc >= 4 && std::stoll(argv[3]) > 0 ? std::stoll(argv[3]) : n;
    const Device device = parse_device(argc == 5 ? argv[4] : "cpu");
    const DType act = device == Device::kCpu ? DType::kF32 : DType::kBF16;
    auto config = model::LlamaConfig::load(dir);
    launch::TpContext tp = launch::make_tp_context(&argc, &argv, device, 0);
    auto weights = model::load_llama_weights(dir, config, device, device == Device::kCpu ? config.dtype : act, {}, tp.shard);
    OwnedStream stream(device);
    model::LlamaModel llama(config, std::move(weights), stream.get(), act, tp.tp);
    model::KvCache kv(llama.local_config(), model::kv_shape_for_tokens(n, 4), device, act);
    // Scatter the prompt over pages in reverse order so the page table is exercised.
    std::vector<int32_t> slots;
    const int64_t pages = kv.shape().num_pages;
    for (int64_t p = 0; p < n; ++p) slots.push_back(static_cast<int32_t>((pages - 1 - p / 4) * 4 + p % 4));
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t begin = 0; begin < n; begin += chunk) {
      const int64_t end = std::min(n, begin + chunk);
      model::ForwardBatch b;
      for (int64_t p = begin; p < end; ++p) {
        b.input_ids.push_back(ids[static_cast<size_t>(p)]);
        b.positions.push_back(static_cast<int32_t>(p));
        b.out_cache_loc.push_back(slots[static_cast<size_t>(p)]);
        b.logit_rows.push_back(static_cast<int32_t>(p - begin));
      }
      b.kv_indices.assign(slots.begin(), slots.begin() + end);
      b.qo_indptr = {0, static_cast<int32_t>(end - begin)};
      b.kv_indptr = {0, static_cast<int32_t>(end)};
      const TensorView logits = llama.forward(b, kv);
      const int64_t vocab = config.vocab_size;
      std::vector<float> host(static_cast<size_t>(logits.numel()));
      copy_async(host.data(), logits.data, host.size() * 4, stream.get());
      synchronize(stream.get());
      for (int64_t r = 0; r < end - begin; ++r)
        rows.push_back(std::vector<float>(host.begin() + r * vocab, host.begin() + (r + 1) * vocab));
    }
    if (tp.rank0()) std::cout << nlohmann::json{{"logits", rows}}.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "aerie-dump-logits: error: " << e.what() << "\n";
    return 2;
  }
}
