// A safetensors file's header and tensor table.
#include "fuzz_file.hpp"
#include "kernels/error.hpp"
#include "model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzFile f(data, size);
  try {
    aerie::model::SafetensorsFile st(f.path);
    for (const auto& name : st.names()) (void)st.find(name);
  } catch (const aerie::Error&) {
  }
  return 0;
}
