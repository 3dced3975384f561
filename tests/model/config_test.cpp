#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "kernels/error.hpp"
#include "model/config.hpp"
#include "model/generation_config.hpp"
#include "model/rope_frequencies.hpp"

using namespace aerie;
using namespace aerie::model;

namespace {
const char* kBase = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 100, "hidden_size": 64,
  "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-5, "eos_token_id": [7, 8], "bos_token_id": 1, "torch_dtype": "bfloat16")";

std::string with(const std::string& extra) { return std::string(kBase) + extra + "}"; }

void expect_error(const std::string& json, const std::string& needle) {
  try {
    LlamaConfig::from_json_text(json, "config.json");
    ADD_FAILURE() << "accepted: " << json;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(LlamaConfig, ParsesTheUsualFields) {
  auto c = LlamaConfig::from_json_text(with(""), "config.json");
  EXPECT_EQ(c.head_dim, 16);  // hidden / heads when not given
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(LlamaConfig, ReadsBothRopeForms) {
  auto old_form = LlamaConfig::from_json_text(
      with(R"(, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"), "config.json");
  auto new_form = LlamaConfig::from_json_text(
      with(R"(, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
           "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"), "config.json");
  for (const auto& c : {old_form, new_form}) {
    EXPECT_EQ(c.rope_theta, 500000.0);
    EXPECT_EQ(c.rope_scaling.type, "llama3");
    EXPECT_EQ(c.rope_scaling.factor, 8.0);
  }
  auto explicit_head = LlamaConfig::from_json_text(with(R"(, "head_dim": 24, "tie_word_embeddings": true)"), "config.json");
  EXPECT_EQ(explicit_head.head_dim, 24);
  EXPECT_TRUE(explicit_head.tie_word_embeddings);
}

TEST(LlamaConfig, RejectsBadConfigsWithClearErrors) {
  expect_error("{not json", "not valid JSON");
  expect_error(R"({"architectures": ["MixtralForCausalLM"]})", "not supported");
  expect_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8})", "missing field 'vocab_size'");
  expect_error(with(R"(, "num_key_value_heads": 3)"), "multiple of num_key_value_heads");
  expect_error(with(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"), "rope type 'yarn'");
  expect_error(with(R"(, "hidden_act": "gelu")"), "hidden_act");
  expect_error(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": "big", "hidden_size": 8})", "must be an integer");
  expect_error(with(R"(, "head_dim": 15)"), "head_dim must be even");
}

TEST(LlamaConfig, NamedShapes) {
  auto c = LlamaConfig::named_shape("llama-3.1-8b");
  EXPECT_NEAR(static_cast<double>(c.num_parameters()), 8.03e9, 0.01e9);
  auto s = LlamaConfig::named_shape("llama-3.2-1b");
  EXPECT_NEAR(static_cast<double>(s.num_parameters()), 1.236e9, 0.01e9);
  // SmolLM2-135M: 134,515,008 parameters (tied embeddings), as its GGUF's metadata gives them.
  EXPECT_EQ(LlamaConfig::named_shape("smollm2-135m").num_parameters(), 134515008);
  EXPECT_THROW(LlamaConfig::named_shape("gpt-5"), Error);
}

TEST(RopeFrequencies, Llama3ScalingMatchesItsDefinition) {
  auto c = LlamaConfig::named_shape("llama-3.1-8b");
  auto r = rope_frequencies(c);
  ASSERT_EQ(r.inv_freq.size(), 64u);
  for (size_t i = 0; i < 64; ++i) {
    const double base = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / 128.0);
    const double wavelen = 2 * std::numbers::pi / base;
    double want;
    if (wavelen < 8192.0 / 4.0) want = base;                   // high frequency: kept
    else if (wavelen > 8192.0 / 1.0) want = base / 8.0;        // low frequency: scaled
    else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1 - smooth) * base / 8.0 + smooth * base;
    }
    EXPECT_NEAR(r.inv_freq[i], want, want * 1e-5) << i;
  }
  auto lin = LlamaConfig::named_shape("tiny");
  lin.rope_scaling = {.type = "linear", .factor = 4.0};
  EXPECT_FLOAT_EQ(rope_frequencies(lin).inv_freq[0], 0.25f);
}

TEST(GenerationConfig, AddsEosIdsAndSamplingDefaults) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("aerie_genconfig_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << with("");
  EXPECT_EQ(LlamaConfig::load(dir).eos_token_ids, (std::vector<int32_t>{7, 8}));  // no generation_config.json
  EXPECT_FLOAT_EQ(load_generation_config(dir).sampling.temperature, 1.0f);
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [8, 9], "temperature": 0.6, "top_p": 0.9, "top_k": 0})";
  EXPECT_EQ(LlamaConfig::load(dir).eos_token_ids, (std::vector<int32_t>{7, 8, 9}));  // merged, no duplicates
  const auto g = load_generation_config(dir);
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.9f);
  EXPECT_EQ(g.sampling.top_k, -1);  // transformers' 0 is "off"
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": 500})";
  EXPECT_THROW(LlamaConfig::load(dir), Error);  // outside the vocabulary
  std::ofstream(dir / "generation_config.json") << R"({"top_p": "high"})";
  EXPECT_THROW(load_generation_config(dir), Error);
  fs::remove_all(dir);
}
