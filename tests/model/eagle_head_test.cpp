// EAGLE heads read from checkpoint folders in the formats sglang loads: an EAGLE3 head
// (LlamaForCausalLMEagle3: fc [H, 3H], midlayer.* with 2H-wide q/k/v, norm, its own lm_head
// over a reduced vocabulary, d2t) and an EAGLE-1 head (LlamaForCausalLMEagle: fc [H, 2H],
// layers.0.*, with or without a "model." prefix): config fields, the draft-to-target map,
// a forward of the loaded head, and errors naming the file and tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "model/eagle_head.hpp"
#include "model/llama_weights.hpp"

using namespace aerie;
using namespace aerie::model;
namespace fs = std::filesystem;

namespace {

struct Tensor {
  std::string name, dtype;  // "F32" or "I64"
  std::vector<int64_t> shape;
  std::vector<int64_t> ints = {};  // I64 values
};

// A head folder: config.json and model.safetensors (F32 values from a fixed pattern).
class HeadDir {
 public:
  HeadDir(const nlohmann::json& config, const std::vector<Tensor>& tensors) {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("aerie_eagle_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
    std::ofstream(path_ / "config.json") << config.dump();
    nlohmann::json h = nlohmann::json::object();
    std::string data;
    for (const auto& t : tensors) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      const size_t begin = data.size();
      for (int64_t i = 0; i < n; ++i) {
        if (t.dtype == "I64") {
          data.append(reinterpret_cast<const char*>(&t.ints[static_cast<size_t>(i)]), 8);
        } else {
          const float v = 0.05f * std::sin(0.37f * static_cast<float>(i + 7 * static_cast<int64_t>(begin % 13)));
          data.append(reinterpret_cast<const char*>(&v), 4);
        }
      }
      h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
    }
    const std::string header = h.dump();
    std::ofstream f(path_ / "model.safetensors", std::ios::binary);
    const uint64_t len = header.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>((len >> (8 * i)) & 0xff));
    f << header << data;
  }
  ~HeadDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const LlamaConfig& target_config() {
  static const auto c = LlamaConfig::named_shape("tiny");
  return c;
}

nlohmann::json head_config(const std::string& arch) {
  const auto& t = target_config();
  return {{"architectures", {arch}}, {"hidden_size", t.hidden_size}, {"intermediate_size", t.intermediate_size},
          {"num_attention_heads", t.num_heads}, {"num_key_value_heads", t.num_kv_heads}, {"head_dim", t.head_dim},
          {"num_hidden_layers", 1}, {"vocab_size", t.vocab_size}, {"max_position_embeddings", t.max_position_embeddings},
          {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}};
}

// The decoder layer's tensors under `p`, q/k/v reading `in` columns.
std::vector<Tensor> layer_tensors(const std::string& p, int64_t in, bool input_norms) {
  const auto& t = target_config();
  const int64_t h = t.hidden_size, q = t.q_size(), kv = t.kv_size(), inter = t.intermediate_size;
  std::vector<Tensor> v = {{p + "self_attn.q_proj.weight", "F32", {q, in}},       {p + "self_attn.k_proj.weight", "F32", {kv, in}},
                           {p + "self_attn.v_proj.weight", "F32", {kv, in}},      {p + "self_attn.o_proj.weight", "F32", {h, q}},
                           {p + "post_attention_layernorm.weight", "F32", {h}}, {p + "mlp.gate_proj.weight", "F32", {inter, h}},
                           {p + "mlp.up_proj.weight", "F32", {inter, h}},         {p + "mlp.down_proj.weight", "F32", {h, inter}}};
  if (input_norms) {
    v.push_back({p + "input_layernorm.weight", "F32", {h}});
    v.push_back({p + "hidden_norm.weight", "F32", {h}});
  }
  return v;
}

constexpr int64_t kDraftVocab = 64;

std::vector<Tensor> eagle3_tensors(bool with_d2t) {
  const int64_t h = target_config().hidden_size;
  auto v = layer_tensors("midlayer.", 2 * h, true);
  v.push_back({"fc.weight", "F32", {h, 3 * h}});
  v.push_back({"norm.weight", "F32", {h}});
  v.push_back({"lm_head.weight", "F32", {kDraftVocab, h}});
  if (with_d2t) {
    std::vector<int64_t> d2t;
    for (int64_t i = 0; i < kDraftVocab; ++i) d2t.push_back(i * 7 % 3 + i * 5);  // target id = 6i + (7i mod 3)
    v.push_back({"d2t", "I64", {kDraftVocab}, d2t});
  }
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One forward of a loaded head over a 3-token prompt (hidden rows of the head's input width).
TensorView run_head(EagleHead& head, KvCache& kv) {
  ForwardBatch b;
  b.input_ids = {5, 17, 42};
  b.positions = {0, 1, 2};
  b.out_cache_loc = {1, 2, 3};
  b.qo_indptr = {0, 3};
  b.kv_indptr = {0, 3};
  b.kv_indices = {1, 2, 3};
  b.logit_rows = {2};
  const int64_t width = head.config().input_width();
  Buffer hidden(Device::kCpu, DType::kF32, {3, width});
  std::vector<float> values(static_cast<size_t>(3 * width));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.1f * std::cos(0.1f * static_cast<float>(i));
  hidden.copy_from_host(values.data(), hidden.nbytes());
  return head.forward(b, hidden.view(), kv);
}

}  // namespace

TEST(EagleHeadCheckpoint, Eagle3WithReducedVocabularyAndD2t) {
  auto config = head_config("LlamaForCausalLMEagle3");
  config["draft_vocab_size"] = kDraftVocab;
  config["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {0, 0, 0}}};
  HeadDir dir(config, eagle3_tensors(true));
  const auto c = EagleHeadConfig::load(dir.path(), target_config());
  EXPECT_EQ(c.kind, EagleKind::kEagle3);
  EXPECT_EQ(c.draft_vocab, kDraftVocab);
  EXPECT_EQ(c.aux_layers, (std::vector<int64_t>{1, 1, 1}));  // sglang names layer outputs: the next layer's input
  LlamaModel target(target_config(), random_llama_weights(target_config(), 3, Device::kCpu, DType::kF32), Stream::cpu(), DType::kF32);
  EagleHead head(c, load_eagle_head(dir.path(), c, Device::kCpu, DType::kF32), target);
  EXPECT_EQ(head.vocab(), kDraftVocab);
  for (int32_t i = 0; i < kDraftVocab; ++i) EXPECT_EQ(head.to_target(i), 6 * i + (7 * i) % 3) << "draft id " << i;
  KvCache kv(c.layer, kv_shape_for_tokens(16, 1), Device::kCpu, DType::kF32);
  const TensorView logits = run_head(head, kv);
  ASSERT_EQ(logits.dim(0), 1);
  ASSERT_EQ(logits.dim(1), kDraftVocab);
  for (int64_t v = 0; v < kDraftVocab; ++v) EXPECT_TRUE(std::isfinite(logits.ptr<float>()[v]));
}

TEST(EagleHeadCheckpoint, Eagle1WithAModelPrefixUsesTheTargetsLmHead) {
  const int64_t h = target_config().hidden_size;
  auto tensors = layer_tensors("model.layers.0.", h, false);
  tensors.push_back({"fc.weight", "F32", {h, 2 * h}});
  HeadDir dir(head_config("LlamaForCausalLMEagle"), tensors);
  const auto c = EagleHeadConfig::load(dir.path(), target_config());
  EXPECT_EQ(c.kind, EagleKind::kEagle1);
  LlamaModel target(target_config(), random_llama_weights(target_config(), 3, Device::kCpu, DType::kF32), Stream::cpu(), DType::kF32);
  EagleHead head(c, load_eagle_head(dir.path(), c, Device::kCpu, DType::kF32), target);
  EXPECT_EQ(head.vocab(), target_config().vocab_size);
  EXPECT_EQ(head.to_target(17), 17);
  KvCache kv(c.layer, kv_shape_for_tokens(16, 1), Device::kCpu, DType::kF32);
  EXPECT_EQ(run_head(head, kv).dim(1), target_config().vocab_size);
}

TEST(EagleHeadCheckpoint, BadHeadsNameTheFileAndTensor) {
  auto has = [](const std::string& err, const std::string& what) { EXPECT_NE(err.find(what), std::string::npos) << err; };
  auto config = head_config("LlamaForCausalLMEagle3");
  config["draft_vocab_size"] = kDraftVocab;
  config["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {0, 0, 0}}};
  {  // a reduced vocabulary without d2t
    HeadDir dir(config, eagle3_tensors(false));
    const auto c = EagleHeadConfig::load(dir.path(), target_config());
    has(error_of([&] { load_eagle_head(dir.path(), c, Device::kCpu, DType::kF32); }), "a reduced draft vocabulary needs the d2t tensor");
  }
  {  // a missing tensor
    auto tensors = eagle3_tensors(true);
    tensors.erase(tensors.begin());  // midlayer.self_attn.q_proj.weight
    HeadDir dir(config, tensors);
    const auto c = EagleHeadConfig::load(dir.path(), target_config());
    has(error_of([&] { load_eagle_head(dir.path(), c, Device::kCpu, DType::kF32); }), "midlayer.self_attn.q_proj.weight");
  }
  {  // a head for another model
    auto other = config;
    other["hidden_size"] = 64;
    HeadDir dir(other, {});
    has(error_of([&] { EagleHeadConfig::load(dir.path(), target_config()); }), "differs from the target's");
  }
  {  // not an EAGLE head
    HeadDir dir(head_config("LlamaForCausalLM"), {});
    has(error_of([&] { EagleHeadConfig::load(dir.path(), target_config()); }), "is not an EAGLE head");
  }
}

// A CUDA graph captured over a workspace keeps writing to the head's scratch for it: an
// eager forward of a larger batch (which grows the eager workspace) must not move it. Seen on
// the H200: the graphs of the draft chain wrote into freed scratch after a long prefill.
TEST(EagleHeadScratch, AWorkspacesScratchStaysWhereItWasAfterLargerEagerForwards) {
  const auto target_cfg = LlamaConfig::named_shape("tiny");
  LlamaModel target(target_cfg, random_llama_weights(target_cfg, 3, Device::kCpu, DType::kF32), Stream::cpu(), DType::kF32);
  const auto hc = EagleHeadConfig::for_target(EagleKind::kEagle3, target_cfg);
  EagleHead head(hc, random_eagle_head(hc, 4, Device::kCpu, DType::kF32), target);
  KvCache kv(hc.layer, kv_shape_for_tokens(512, 1), Device::kCpu, DType::kF32);
  auto batch = [](int tokens) {  // one sequence of `tokens` new tokens at slots 1..tokens
    ForwardBatch b;
    for (int t = 0; t < tokens; ++t) {
      b.input_ids.push_back(5 + t);
      b.positions.push_back(t);
      b.out_cache_loc.push_back(1 + t);
      b.kv_indices.push_back(1 + t);
    }
    b.qo_indptr.push_back(tokens);
    b.kv_indptr.push_back(tokens);
    b.logit_rows.push_back(tokens - 1);
    return b;
  };
  ForwardCapacity cap;
  cap.max_tokens = cap.max_seqs = cap.max_logit_rows = 4;
  cap.max_kv_indices = 64;
  auto ws = head.make_workspace(cap);
  const ForwardBatch small = batch(4);
  ws->upload(small, Stream::cpu());
  Buffer hidden(Device::kCpu, DType::kF32, {4, hc.input_width()});
  hidden.zero();
  const ForwardDims dims{.tokens = 4, .seqs = 1, .logit_rows = 1, .custom_mask = false, .num_splits = 1, .logits_all_rows = false,
                         .attention_tokens_per_block = 1};
  head.run(*ws, hidden.view(), kv, dims);
  const void* before = head.out_hidden().data;
  Buffer big_hidden(Device::kCpu, DType::kF32, {300, hc.input_width()});
  big_hidden.zero();
  head.forward(batch(300), big_hidden.view(), kv);  // the eager workspace grows
  EXPECT_NE(head.out_hidden().data, before);          // the eager forward has scratch of its own
  head.run(*ws, hidden.view(), kv, dims);
  EXPECT_EQ(head.out_hidden().data, before) << "the workspace's scratch moved";
}
