// Text through the byte-level BPE tokenizer: encode (invalid UTF-8 is refused), decode, and
// the streaming detokenizer over the ids one at a time.
#include <string>

#include "fuzz_tokenizer.hpp"
#include "kernels/error.hpp"

using namespace aerie;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const model::BpeTokenizer tok(fuzz_tokenizer_spec(), "fuzz");
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto ids = tok.encode(text);
    const std::string back = tok.decode(ids, /*skip_special=*/true);
    if (back != text && text.find("<|") == std::string::npos && text.find("<tool>") == std::string::npos) __builtin_trap();  // byte-level round trip
    model::IncrementalDetokenizer inc(tok);
    for (int32_t id : ids) (void)inc.push({id});
    (void)inc.finish();
  } catch (const Error&) {
  }
  return 0;
}
