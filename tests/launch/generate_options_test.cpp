#include <gtest/gtest.h>

#include "kernels/error.hpp"
#include "launch/generate_options.hpp"

using namespace aerie;
using namespace aerie::launch;

namespace {
std::optional<GenerateOptions> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "aerie-generate");
  return parse_generate_args(static_cast<int>(args.size()), args.data());
}
}  // namespace

TEST(GenerateOptions, AcceptsTheDocumentedForm) {
  auto o = parse({"--model-path", "/m", "--input-ids", "1,5,7", "--input-ids", "9", "--max-new-tokens", "8",
                  "--temperature", "0", "--seed", "3", "--device", "cpu", "--output", "json"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->input_ids, (std::vector<std::vector<int32_t>>{{1, 5, 7}, {9}}));
  EXPECT_EQ(o->max_new_tokens, 8);
  EXPECT_EQ(o->sampling.temperature, 0.0f);
  EXPECT_EQ(o->sampling.seed, 3);
}

TEST(GenerateOptions, RejectsBadInputClearly) {
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids", "1,,2"}), Error);
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids", "1,-2"}), Error);
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids", "99999999999"}), Error);
  EXPECT_THROW(parse({"--model-path", "/m"}), Error);                       // no prompt
  EXPECT_THROW(parse({"--input-ids", "1"}), Error);                         // no model
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids", "1", "--device", "tpu"}), Error);
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids", "1", "--temperature", "-1"}), Error);
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids", "1", "--top-p", "0"}), Error);
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids", "1", "--max-new-tokens", "0"}), Error);
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids", "1", "--no-such-flag"}), Error);
  EXPECT_TRUE(parse({"--load-format", "dummy", "--input-ids", "1"}));
}

TEST(GenerateOptions, CountFlagsSayWhatTheyNeed) {
  try {
    parse({"--load-format", "dummy", "--input-ids", "1", "--max-running-requests", "0"});
    ADD_FAILURE() << "accepted 0";
  } catch (const Error& e) {
    // CLI11's own check printed "Value 0 not in range 0.000000 to 1797693...".
    EXPECT_NE(e.message().find("--max-running-requests: must be an integer >= 1, got '0'"), std::string::npos) << e.message();
  }
}
