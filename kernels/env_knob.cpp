#include "kernels/env_knob.hpp"

#include <cstdlib>

namespace aerie::kernels {

int env_knob(const char* name) {
  const char* e = std::getenv(name);
  return e ? std::atoi(e) : 0;
}

int env_knob_or(const char* name, int unset) { return std::getenv(name) ? env_knob(name) : unset; }

bool env_turned_off(const char* name) {
  const char* e = std::getenv(name);
  return e && e[0] == '0';
}

}  // namespace aerie::kernels
