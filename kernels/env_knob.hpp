#pragma once
// Overrides kept for measuring kernel choices on the GPU machine (tools/gpu_verify_tune.sh):
// an integer environment variable, read by each caller once.

namespace aerie::kernels {

// The value of environment variable `name` as an integer; 0 when it is unset or not a number.
int env_knob(const char* name);

// The same with another value when the variable is unset (a set value, even 0 or not a number,
// is read as env_knob reads it): for knobs whose default is not 0.
int env_knob_or(const char* name, int unset);

// Whether environment variable `name` turns a path off: set, to a value starting with 0.
bool env_turned_off(const char* name);

}  // namespace aerie::kernels
