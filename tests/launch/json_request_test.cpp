#include <gtest/gtest.h>

#include "kernels/error.hpp"
#include "launch/json_request.hpp"

using namespace aerie;
using nlohmann::json;

TEST(JsonRequest, ParsesSglangGenerateBodies) {
  auto p = launch::parse_generate_request(
      json::parse(R"({"rid": "a1", "input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 5, "temperature": 0.5,
                     "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 7, "stop_token_ids": [4], "ignore_eos": true}})"),
      100);
  EXPECT_EQ(p.rid, "a1");
  EXPECT_EQ(p.request.prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p.request.max_new_tokens, 5);
  EXPECT_FLOAT_EQ(p.request.sampling.temperature, 0.5f);
  EXPECT_EQ(p.request.sampling.top_k, 20);
  EXPECT_EQ(p.request.sampling.seed, 7);
  EXPECT_EQ(p.request.stop_token_ids, std::vector<int32_t>{4});
  EXPECT_TRUE(p.request.ignore_eos);
  auto d = launch::parse_generate_request(json::parse(R"({"input_ids": [5], "rid": 12})"), 100);
  EXPECT_EQ(d.rid, "12");
  EXPECT_EQ(d.request.max_new_tokens, 128);  // sglang's defaults
  EXPECT_FLOAT_EQ(d.request.sampling.temperature, 1.0f);
}

TEST(JsonRequest, RejectsEveryBadFieldClearly) {
  auto bad = [](const char* body, const char* needle) {
    try {
      launch::parse_generate_request(json::parse(body), 100);
      ADD_FAILURE() << "accepted " << body;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad(R"([1, 2])", "JSON object");
  bad(R"({"text": "hi"})", "'input_ids' is required");
  bad(R"({"input_ids": []})", "empty");
  bad(R"({"input_ids": [1, 100]})", "outside the vocabulary");
  bad(R"({"input_ids": [1, "x"]})", "integers");
  bad(R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 0}})", "max_new_tokens");
  bad(R"({"input_ids": [1], "sampling_params": {"max_new_tokens": "5"}})", "must be an integer");
  bad(R"({"input_ids": [1], "sampling_params": {"temperature": -0.5}})", "temperature");
  bad(R"({"input_ids": [1], "sampling_params": {"top_p": 1.5}})", "top_p");
  bad(R"({"input_ids": [1], "sampling_params": {"ignore_eos": "yes"}})", "true or false");
  bad(R"({"input_ids": [1], "sampling_params": []})", "must be an object");
  bad(R"({"input_ids": [1], "rid": [1]})", "'rid'");
}
