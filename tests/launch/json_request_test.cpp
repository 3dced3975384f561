#include <gtest/gtest.h>

#include "kernels/error.hpp"
#include "launch/serving/json_request.hpp"

#include <set>

namespace {
const aerie::launch::RequestLimits kLimits{.vocab_size = 100, .max_total_tokens = 64, .tokenizer = nullptr};
}

using namespace aerie;
using nlohmann::json;

TEST(JsonRequest, ParsesSglangGenerateBodies) {
  auto p = launch::parse_generate_request(
      json::parse(R"({"rid": "a1", "input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 5, "temperature": 0.5,
                     "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 7, "stop_token_ids": [4], "ignore_eos": true,
                     "stop": ["\n\n", "END"]}, "stream": true, "return_logprob": true, "top_logprobs_num": 3})"),
      kLimits);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_TRUE(p.stream);
  EXPECT_EQ(p.request.logprobs, 3);
  EXPECT_EQ(p.rid, "a1");
  EXPECT_EQ(p.request.prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p.request.max_new_tokens, 5);
  EXPECT_FLOAT_EQ(p.request.sampling.temperature, 0.5f);
  EXPECT_EQ(p.request.sampling.top_k, 20);
  EXPECT_EQ(p.request.sampling.seed, 7);
  EXPECT_EQ(p.request.stop_token_ids, std::vector<int32_t>{4});
  EXPECT_TRUE(p.request.ignore_eos);
  auto d = launch::parse_generate_request(json::parse(R"({"input_ids": [5], "rid": 12, "sampling_params": {"stop": "x"}})"), kLimits);
  EXPECT_EQ(d.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(d.request.logprobs, -1);
  EXPECT_FALSE(d.stream);
  EXPECT_EQ(d.rid, "12");
  EXPECT_EQ(launch::parse_generate_request(json::parse(R"({"input_ids": [5]})"), {.vocab_size = 100, .max_total_tokens = 4096, .tokenizer = nullptr})
                .request.max_new_tokens,
            128);  // sglang's defaults
  EXPECT_FLOAT_EQ(d.request.sampling.temperature, 1.0f);
  // generation_config.json's values fill what a request leaves out, never what it sets.
  auto limits = kLimits;
  limits.sampling = {.temperature = 0.6f, .top_p = 0.9f, .top_k = 20, .min_p = 0.05f};
  auto g = launch::parse_generate_request(json::parse(R"({"input_ids": [5], "sampling_params": {"temperature": 0}})"), limits);
  EXPECT_FLOAT_EQ(g.request.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(g.request.sampling.top_p, 0.9f);
  EXPECT_EQ(g.request.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(g.request.sampling.min_p, 0.05f);
}

TEST(JsonRequest, RejectsEveryBadFieldClearly) {
  auto bad = [](const char* body, const char* needle) {
    try {
      launch::parse_generate_request(json::parse(body), kLimits);
      ADD_FAILURE() << "accepted " << body;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad(R"([1, 2])", "JSON object");
  bad(R"({"text": "hi"})", "needs a tokenizer");
  bad(R"({"input_ids": [1], "sampling_params": {"max_new_tokens": 64}})", "exceeds 64 tokens");
  bad(R"({"input_ids": [1], "stream": "yes"})", "true or false");
  bad(R"({"input_ids": [1], "sampling_params": {"stop": [1]}})", "list of strings");
  bad(R"({"input_ids": [1], "return_logprob": true, "top_logprobs_num": 99})", "top_logprobs_num");
  bad(R"({"input_ids": []})", "empty");
  bad(R"({"input_ids": [1, 100]})", "outside the vocabulary");
  bad(R"({"input_ids": [1, "x"]})", "integers");
  bad(R"({"input_ids": [1], "sampling_params": {"max_new_tokens": -1}})", "max_new_tokens");
  bad(R"({"input_ids": [1], "sampling_params": {"max_new_tokens": "5"}})", "must be an integer");
  bad(R"({"input_ids": [1], "sampling_params": {"temperature": -0.5}})", "temperature");
  bad(R"({"input_ids": [1], "sampling_params": {"top_p": 1.5}})", "top_p");
  bad(R"({"input_ids": [1], "sampling_params": {"ignore_eos": "yes"}})", "true or false");
  bad(R"({"input_ids": [1], "sampling_params": []})", "must be an object");
  bad(R"({"input_ids": [1], "rid": [1]})", "'rid'");
}

// Hostile bodies: nesting that would overflow a recursive walk, counts that would overflow
// the length check, integers past their field's range.
TEST(JsonRequest, DeepNestingIsRefusedWhileParsing) {
  const int levels = 150000;
  for (const char* wrap : {"{\"input_ids\": [1], \"sampling_params\": ", "{\"input_ids\": "}) {
    std::string text = wrap;
    for (int i = 0; i < levels; ++i) text += "[";
    for (int i = 0; i < levels; ++i) text += "]";
    text += "}";
    try {
      launch::parse_client_json(text);
      FAIL() << "accepted " << levels << " levels";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nested deeper than"), std::string::npos) << e.what();
    }
  }
  // At the cap it parses.
  std::string ok = "{\"a\": ";
  for (int i = 0; i < launch::kMaxJsonDepth - 1; ++i) ok += "[";
  for (int i = 0; i < launch::kMaxJsonDepth - 1; ++i) ok += "]";
  ok += "}";
  EXPECT_NO_THROW(launch::parse_client_json(ok));
  EXPECT_THROW(launch::parse_client_json("{\"a\": "), Error);
}

TEST(JsonRequest, HugeCountsAndOutOfRangeIntegersAreRefused) {
  auto parse = [](const std::string& sampling) {
    return launch::parse_generate_request(json::parse(R"({"input_ids": [1, 2], "sampling_params": )" + sampling + "}"), kLimits);
  };
  for (const char* n : {"9223372036854775807", "9223372036854775806", "18446744073709551615"})
    EXPECT_THROW(parse(std::string(R"({"max_new_tokens": )") + n + "}"), Error) << n;
  EXPECT_THROW(parse(R"({"top_k": 4294967297})"), Error);
  EXPECT_THROW(launch::parse_generate_request(json::parse(R"({"input_ids": [1], "return_logprob": true, "top_logprobs_num": 4294967297})"),
                                              kLimits),
               Error);
  EXPECT_NO_THROW(parse(R"({"max_new_tokens": 62})"));  // 2 + 62 = 64, the limit
  EXPECT_THROW(parse(R"({"max_new_tokens": 63})"), Error);
}

TEST(JsonRequest, UnseededRequestsGetFreshSeeds) {
  std::set<int64_t> seeds;
  for (int i = 0; i < 8; ++i)
    seeds.insert(launch::parse_generate_request(json::parse(R"({"input_ids": [1], "sampling_params": {"temperature": 1}})"), kLimits)
                     .request.sampling.seed);
  EXPECT_EQ(seeds.size(), 8u);  // three identical unseeded requests used to sample the same tokens
  for (int64_t s : seeds) EXPECT_GE(s, 0);
  EXPECT_EQ(launch::parse_generate_request(json::parse(R"({"input_ids": [1], "sampling_params": {"seed": 0}})"), kLimits).request.sampling.seed, 0);
}

TEST(JsonRequest, TopKIsMinusOneOrPositive) {
  EXPECT_THROW(launch::parse_generate_request(json::parse(R"({"input_ids": [1], "sampling_params": {"top_k": -7}})"), kLimits), Error);
  EXPECT_THROW(launch::parse_generate_request(json::parse(R"({"input_ids": [1], "sampling_params": {"top_k": 0}})"), kLimits), Error);
  EXPECT_EQ(launch::parse_generate_request(json::parse(R"({"input_ids": [1], "sampling_params": {"top_k": -1}})"), kLimits).request.sampling.top_k, -1);
}

TEST(JsonRequest, ClientsSeeMessagesWithoutSourceLocations) {
  try {
    launch::parse_generate_request(json::parse(R"({"input_ids": "x"})"), kLimits);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(".cpp:"), std::string::npos) << e.what();  // the log keeps it
    EXPECT_EQ(std::string(e.what()).rfind(e.message(), 0), 0u);
    EXPECT_EQ(e.message().find(".cpp:"), std::string::npos) << e.message();
    EXPECT_EQ(client_message(e), e.message());
  }
  EXPECT_EQ(client_message(std::runtime_error("plain")), "plain");
}

// What Aerie cannot honour is refused with a reason, in sglang's sampling_params and in
// OpenAI's body alike; the neutral values pass.
TEST(JsonRequest, UnsupportedOptionsAreRefusedNotIgnored) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"("n": 17)", "'n'"},
      {R"("n": 0)", "'n'"},
      {R"("json_schema": "{}")", "structured output"},
      {R"("regex": "a+")", "structured output"},
      {R"("ebnf": "root ::= x")", "structured output"},
  };
  auto message = [](auto&& parse) -> std::string {
    try {
      parse();
    } catch (const Error& e) {
      return e.message();
    }
    return "";
  };
  for (const auto& [field, why] : refused) {
    const auto sg = json::parse(R"({"input_ids": [1], "sampling_params": {)" + field + "}}");
    EXPECT_NE(message([&] { launch::parse_generate_request(sg, kLimits); }).find(why), std::string::npos) << field;
    const auto oai = json::parse(R"({"prompt": [1], "max_tokens": 2, )" + field + "}");
    EXPECT_NE(message([&] { launch::parse_completion_request(oai, kLimits); }).find(why), std::string::npos) << field;
  }
  for (const std::string body : {R"({"prompt": [1], "response_format": {"type": "json_object"}})",
                                 R"({"prompt": [1], "tools": [{"type": "function", "function": {"name": "f"}}]})",
                                 R"({"prompt": [1], "tool_choice": "auto"})"})
    EXPECT_THROW(launch::parse_completion_request(json::parse(body), kLimits), Error) << body;
  EXPECT_NO_THROW(launch::parse_completion_request(
      json::parse(R"({"prompt": [1], "max_tokens": 2, "n": 1, "response_format": {"type": "text"}, "tools": [], "tool_choice": "none"})"),
      kLimits));
}

TEST(JsonRequest, PenaltiesBiasAndMinTokensAreParsedAndChecked) {
  const auto sg = launch::parse_generate_request(
      json::parse(R"({"input_ids": [1], "sampling_params": {"frequency_penalty": 0.5, "presence_penalty": -0.25,
                      "repetition_penalty": 1.3, "min_new_tokens": 3, "logit_bias": {"7": 5.5, "9": -100}}})"),
      kLimits);
  const auto& s = sg.request.sampling;
  EXPECT_FLOAT_EQ(s.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.presence_penalty, -0.25f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.3f);
  EXPECT_EQ(s.min_new_tokens, 3);
  EXPECT_EQ(s.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, 5.5f}, {9, -100.0f}}));
  const auto oai = launch::parse_completion_request(json::parse(R"({"prompt": [1], "max_tokens": 4, "min_tokens": 2, "logit_bias": {"3": 1}, "n": 3})"), kLimits);
  EXPECT_EQ(oai.request.sampling.min_new_tokens, 2);
  EXPECT_EQ(oai.n, 3);
  EXPECT_EQ(launch::parse_generate_request(json::parse(R"({"input_ids": [1], "sampling_params": {"n": 4}})"), kLimits).n, 4);
  for (const std::string bad : {R"({"frequency_penalty": 3})", R"({"repetition_penalty": 0})", R"({"logit_bias": {"100": 1}})",
                                R"({"logit_bias": {"x": 1}})", R"({"logit_bias": {"1": 101}})", R"({"min_new_tokens": -1})"})
    EXPECT_THROW(launch::parse_generate_request(json::parse(R"({"input_ids": [1], "sampling_params": )" + bad + "}"), kLimits), Error) << bad;
}
