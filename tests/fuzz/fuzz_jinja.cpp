// A chat template's source (from a model's files): parse, then render a small conversation.
#include <string>

#include "kernels/error.hpp"
#include "launch/jinja/template.hpp"

using namespace aerie;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const jinja::Value ctx = jinja::Value::parse(R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}], "add_generation_prompt": true,
      "bos_token": "<s>", "eos_token": "</s>", "tools": [{"function": {"name": "f", "parameters": {"a": 1}}}]})");
  try {
    const jinja::Template t(std::string(reinterpret_cast<const char*>(data), size));
    (void)t.render(ctx, 1 << 20);
  } catch (const Error&) {
  }
  return 0;
}
