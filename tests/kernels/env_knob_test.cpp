// env_knob: the integer environment overrides kept for measuring kernel choices.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/env_knob.hpp"

TEST(EnvKnob, ReadsAnIntegerAndZeroWhenUnsetOrNotANumber) {
  ::unsetenv("AERIE_TEST_KNOB");
  EXPECT_EQ(aerie::kernels::env_knob("AERIE_TEST_KNOB"), 0);
  ::setenv("AERIE_TEST_KNOB", "8", 1);
  EXPECT_EQ(aerie::kernels::env_knob("AERIE_TEST_KNOB"), 8);
  ::setenv("AERIE_TEST_KNOB", "many", 1);
  EXPECT_EQ(aerie::kernels::env_knob("AERIE_TEST_KNOB"), 0);
  ::unsetenv("AERIE_TEST_KNOB");
}

TEST(EnvKnob, TakesItsDefaultOnlyWhenUnset) {
  ::unsetenv("AERIE_TEST_KNOB");
  EXPECT_EQ(aerie::kernels::env_knob_or("AERIE_TEST_KNOB", 16), 16);
  ::setenv("AERIE_TEST_KNOB", "0", 1);
  EXPECT_EQ(aerie::kernels::env_knob_or("AERIE_TEST_KNOB", 16), 0);
  ::setenv("AERIE_TEST_KNOB", "4", 1);
  EXPECT_EQ(aerie::kernels::env_knob_or("AERIE_TEST_KNOB", 16), 4);
  ::unsetenv("AERIE_TEST_KNOB");
}

TEST(EnvKnob, TurnsAPathOffOnlyWhenSetToZero) {
  ::unsetenv("AERIE_TEST_SWITCH");
  EXPECT_FALSE(aerie::kernels::env_turned_off("AERIE_TEST_SWITCH"));
  ::setenv("AERIE_TEST_SWITCH", "0", 1);
  EXPECT_TRUE(aerie::kernels::env_turned_off("AERIE_TEST_SWITCH"));
  ::setenv("AERIE_TEST_SWITCH", "1", 1);
  EXPECT_FALSE(aerie::kernels::env_turned_off("AERIE_TEST_SWITCH"));
  ::unsetenv("AERIE_TEST_SWITCH");
}
