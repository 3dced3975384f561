#pragma once
// Overrides kept for measuring kernel choices on the GPU machine (tools/gpu_verify_tune.sh):
// an integer environment variable, read by each caller once.

namespace aerie::kernels {

// The value of environment variable `name` as an integer; 0 when it is unset or not a number.
int env_knob(const char* name);

}  // namespace aerie::kernels
