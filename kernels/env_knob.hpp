#pragma once
// Overrides kept for measuring kernel choices on the GPU machine (tools/gpu_verify_tune.sh):
// an integer environment variable, read by each caller once.

namespace aerie::kernels {

// The value of environment variable `name` as an integer; 0 when it is unset or not a number.
int env_knob(const char* name);

// Whether environment variable `name` turns a path off: set, to a value starting with 0.
bool env_turned_off(const char* name);

}  // namespace aerie::kernels
