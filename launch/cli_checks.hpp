#pragma once
// Command-line value checks with messages a user can act on (CLI11's PositiveNumber says
// "Value 0 not in range 0.000000 to 1797693134862315708145274237317043567981...").
#include <CLI/CLI.hpp>
#include <string>

namespace aerie::launch {

inline CLI::Validator integer_at_least(long long low, const char* name) {
  return CLI::Validator(
      [low](std::string& in) -> std::string {
        try {
          size_t used = 0;
          const long long v = std::stoll(in, &used);
          if (used == in.size() && v >= low) return "";
        } catch (const std::exception&) {
        }
        return "must be an integer >= " + std::to_string(low) + ", got '" + in + "'";
      },
      name);
}
inline const CLI::Validator kPositive = integer_at_least(1, "INT>=1");
inline const CLI::Validator kNonNegative = integer_at_least(0, "INT>=0");

}  // namespace aerie::launch
