#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/error.hpp"
#include "kernels/log.hpp"

using namespace aerie;

TEST(Log, LevelsByNameAndUnknownNamesRefused) {
  EXPECT_EQ(log::parse_level("debug"), log::Level::kDebug);
  EXPECT_EQ(log::parse_level("warning"), log::Level::kWarning);
  EXPECT_EQ(log::parse_level("warn"), log::Level::kWarning);
  try {
    log::parse_level("verbose");
    FAIL() << "accepted an unknown level";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("debug, info, warning or error"), std::string::npos) << e.what();
  }
}

TEST(Log, OnlyLinesAtOrAboveTheLevelAreWrittenWithTheRank) {
  std::vector<std::string> lines;
  log::set_test_sink([&](log::Level, const std::string& l) { lines.push_back(l); });
  log::set_level(log::Level::kInfo);
  log::set_rank(3);
  int built = 0;
  AERIE_LOG_DEBUG("hidden " << ++built);  // not even formatted below the level
  AERIE_LOG_INFO("shown " << 7);
  log::set_rank(-1);
  AERIE_LOG_ERROR("plain");
  log::set_test_sink({});
  log::set_level(log::Level::kWarning);
  EXPECT_EQ(built, 0);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "rank 3: shown 7");
  EXPECT_EQ(lines[1], "plain");
}
