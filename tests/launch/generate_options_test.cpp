#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

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

namespace {
std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("aerie_generate_options_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}
}  // namespace

TEST(GenerateOptions, InputIdsFileFollowsTheInputIds) {
  const auto path = write_temp("ok.txt", "4,5\n\n  \n6\r\n7,8,9");  // blank lines skipped, a CRLF line, no final newline
  auto o = parse({"--model-path", "/m", "--input-ids", "1,2", "--input-ids-file", path.c_str()});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->input_ids, (std::vector<std::vector<int32_t>>{{1, 2}, {4, 5}, {6}, {7, 8, 9}}));
  auto only_file = parse({"--model-path", "/m", "--input-ids-file", path.c_str()});
  ASSERT_TRUE(only_file);
  EXPECT_EQ(only_file->input_ids.size(), 3u);
  std::filesystem::remove(path);
}

TEST(GenerateOptions, InputIdsFileErrorsNameTheFileAndLine) {
  const auto bad = write_temp("bad.txt", "1,2\n3,x\n");
  try {
    parse({"--model-path", "/m", "--input-ids-file", bad.c_str()});
    ADD_FAILURE() << "accepted a bad line";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(bad + ", line 2: --input-ids: 'x' is not a non-negative token id"), std::string::npos) << e.message();
  }
  std::filesystem::remove(bad);
  const auto empty = write_temp("empty.txt", "\n\n");
  EXPECT_THROW(parse({"--model-path", "/m", "--input-ids-file", empty.c_str()}), Error);  // no prompt in it
  std::filesystem::remove(empty);
  try {
    parse({"--model-path", "/m", "--input-ids-file", "/no/such/file"});
    ADD_FAILURE() << "accepted a missing file";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cannot read '/no/such/file'"), std::string::npos) << e.message();
  }
}
