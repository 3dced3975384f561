// The loader on good and malformed files: every error names the file and the tensor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "model/llama_weights.hpp"
#include "model/safetensors.hpp"

using namespace aerie;
using namespace aerie::model;
namespace fs = std::filesystem;

namespace {

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("aerie_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

void write_raw(const fs::path& p, const std::string& header, const std::string& data, int64_t claimed_len = -1) {
  std::ofstream f(p, std::ios::binary);
  uint64_t len = claimed_len >= 0 ? static_cast<uint64_t>(claimed_len) : header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((len >> (8 * i)) & 0xff));
  f << header << data;
}

// A tensor: name, dtype, shape, values (as float, stored in dtype).
struct T {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

void write_safetensors(const fs::path& p, const std::vector<T>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const auto& t : tensors) {
    int64_t n = 1;
    for (auto s : t.shape) n *= s;
    const size_t sz = t.dtype == "F32" ? 4 : t.dtype == "I64" || t.dtype == "F64" ? 8 : 2;
    const size_t begin = data.size();
    for (int64_t i = 0; i < n; ++i) {
      if (t.dtype == "F32") {
        float v = 0.01f * static_cast<float>(i % 13);
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        data.append(sz, '\0');
      }
    }
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  h["__metadata__"] = {{"format", "pt"}};
  write_raw(p, h.dump(), data);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

LlamaConfig tiny_config() {
  LlamaConfig c = LlamaConfig::named_shape("tiny");
  c.vocab_size = 10; c.hidden_size = 8; c.intermediate_size = 12; c.num_layers = 1;
  c.num_heads = 2; c.num_kv_heads = 1; c.head_dim = 4;
  return c;
}

std::vector<T> tiny_tensors(const LlamaConfig& c) {
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), i = c.intermediate_size;
  return {{"model.embed_tokens.weight", "F32", {c.vocab_size, h}},
          {"model.layers.0.input_layernorm.weight", "F32", {h}},
          {"model.layers.0.self_attn.q_proj.weight", "F32", {q, h}},
          {"model.layers.0.self_attn.k_proj.weight", "F32", {kv, h}},
          {"model.layers.0.self_attn.v_proj.weight", "F32", {kv, h}},
          {"model.layers.0.self_attn.o_proj.weight", "F32", {h, q}},
          {"model.layers.0.post_attention_layernorm.weight", "F32", {h}},
          {"model.layers.0.mlp.gate_proj.weight", "F32", {i, h}},
          {"model.layers.0.mlp.up_proj.weight", "BF16", {i, h}},
          {"model.layers.0.mlp.down_proj.weight", "F32", {h, i}},
          {"model.norm.weight", "F32", {h}},
          {"lm_head.weight", "F32", {c.vocab_size, h}}};
}

}  // namespace

TEST(Safetensors, ReadsTensorsAndMixedDtypes) {
  TempDir d;
  auto c = tiny_config();
  write_safetensors(d.path() / "model.safetensors", tiny_tensors(c));
  CheckpointReader r(d.path());
  EXPECT_TRUE(r.has("model.norm.weight"));
  TensorView emb = r.get("model.embed_tokens.weight", {10, 8});
  EXPECT_EQ(emb.dtype, DType::kF32);
  EXPECT_FLOAT_EQ(load_as_float(emb.data, emb.dtype, 3), 0.03f);  // the view may be unaligned
  LlamaWeights w = load_llama_weights(d.path(), c, Device::kCpu, DType::kF32);
  EXPECT_EQ(w.layers.at(0).qkv.view().dim(0), c.q_size() + 2 * c.kv_size());
  EXPECT_EQ(w.layers.at(0).gate_up.view().dim(0), 2 * c.intermediate_size);
}

TEST(Safetensors, ShardedCheckpointThroughTheIndex) {
  TempDir d;
  auto c = tiny_config();
  auto all = tiny_tensors(c);
  std::vector<T> a(all.begin(), all.begin() + 6), b(all.begin() + 6, all.end());
  write_safetensors(d.path() / "model-00001-of-00002.safetensors", a);
  write_safetensors(d.path() / "model-00002-of-00002.safetensors", b);
  nlohmann::json idx;
  for (const auto& t : a) idx["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : b) idx["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  std::ofstream(d.path() / "model.safetensors.index.json") << idx.dump();
  EXPECT_NO_THROW(load_llama_weights(d.path(), c, Device::kCpu, DType::kBF16));

  idx["weight_map"]["model.norm.weight"] = "model-00003-of-00002.safetensors";
  std::ofstream(d.path() / "model.safetensors.index.json") << idx.dump();
  EXPECT_NE(error_of([&] { CheckpointReader r(d.path()); }).find("which is missing"), std::string::npos);
  idx["weight_map"]["model.norm.weight"] = "../etc/passwd";
  std::ofstream(d.path() / "model.safetensors.index.json") << idx.dump();
  EXPECT_NE(error_of([&] { CheckpointReader r(d.path()); }).find("plain file name"), std::string::npos);
}

TEST(Safetensors, MalformedFilesGiveClearErrors) {
  TempDir d;
  const fs::path f = d.path() / "model.safetensors";
  auto expect = [&](const std::string& needle) {
    std::string e = error_of([&] { SafetensorsFile s(f); });
    EXPECT_NE(e.find(needle), std::string::npos) << "got: " << e;
    EXPECT_NE(e.find("model.safetensors"), std::string::npos) << "error must name the file: " << e;
  };
  std::ofstream(f) << "abc";
  expect("too short");
  write_raw(f, "{}", "", 1 << 20);
  expect("exceeds the file");
  write_raw(f, "{\"a\": ", "");
  expect("not valid JSON");
  write_raw(f, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})", std::string(8, '\0'));
  expect("outside the data section");
  write_raw(f, R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", std::string(8, '\0'));
  expect("do not match shape and dtype");
  write_raw(f, R"({"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", std::string(8, '\0'));
  expect("unknown dtype 'Q4'");
  write_raw(f, R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", std::string(8, '\0'));
  expect("non-negative");
  write_raw(f, R"({"w": {"dtype": "F32", "shape": [2]}})", std::string(8, '\0'));
  expect("needs dtype, shape and data_offsets");
  write_raw(f, R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", std::string(8, '\0'));
  expect("outside the data section");
  write_raw(f, R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", "");
  expect("overflows");
}

TEST(Safetensors, WrongShapesDtypesAndMissingTensorsNameTheTensor) {
  TempDir d;
  auto c = tiny_config();
  auto tensors = tiny_tensors(c);
  tensors[2].shape = {7, 8};  // q_proj
  write_safetensors(d.path() / "model.safetensors", tensors);
  std::string e = error_of([&] { load_llama_weights(d.path(), c, Device::kCpu, DType::kF32); });
  EXPECT_NE(e.find("model.layers.0.self_attn.q_proj.weight' has shape [7, 8], expected [8, 8]"), std::string::npos) << e;

  tensors = tiny_tensors(c);
  tensors.pop_back();  // lm_head
  write_safetensors(d.path() / "model.safetensors", tensors);
  e = error_of([&] { load_llama_weights(d.path(), c, Device::kCpu, DType::kF32); });
  EXPECT_NE(e.find("no tensor 'lm_head.weight'"), std::string::npos) << e;
  c.tie_word_embeddings = true;  // tied: lm_head is the embedding, so none is needed
  EXPECT_NO_THROW(load_llama_weights(d.path(), c, Device::kCpu, DType::kF32));

  tensors = tiny_tensors(c);
  tensors[1].dtype = "F64";
  write_safetensors(d.path() / "model.safetensors", tensors);
  e = error_of([&] { load_llama_weights(d.path(), c, Device::kCpu, DType::kF32); });
  EXPECT_NE(e.find("input_layernorm.weight' has dtype F64"), std::string::npos) << e;

  tensors = tiny_tensors(c);
  tensors[1].dtype = "I64";
  write_safetensors(d.path() / "model.safetensors", tensors);
  e = error_of([&] { load_llama_weights(d.path(), c, Device::kCpu, DType::kF32); });
  EXPECT_NE(e.find("expected F32, BF16 or F16"), std::string::npos) << e;

  fs::remove(d.path() / "model.safetensors");
  e = error_of([&] { load_llama_weights(d.path(), c, Device::kCpu, DType::kF32); });
  EXPECT_NE(e.find("no model.safetensors"), std::string::npos) << e;
}

TEST(Safetensors, MissingConfigNamesThePath) {
  TempDir d;
  std::string e = error_of([&] { LlamaConfig::load(d.path()); });
  EXPECT_NE(e.find("config.json: cannot open"), std::string::npos) << e;
}
