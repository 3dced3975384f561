// A GGUF file: header, metadata, tensor table, then what Aerie reads from it (config,
// tokenizers, chat template, dequantized tensors).
#include <vector>

#include "fuzz_file.hpp"
#include "kernels/error.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_llama.hpp"

using namespace aerie;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzFile f(data, size);
  try {
    model::GgufFile g(f.path);
    for (const auto& t : g.tensors())
      if (t.nbytes > 0 && t.numel() <= (1 << 16)) {
        std::vector<float> out(static_cast<size_t>(t.numel()));
        model::gguf_dequantize(t.type, t.data, t.numel(), out.data());
      }
    try {
      (void)model::llama_config_from_gguf(g);
    } catch (const Error&) {
    }
    try {
      model::BpeTokenizer tok(model::bpe_spec_from_gguf(g), f.path);
      (void)tok.encode("hello 123 world");
    } catch (const Error&) {
    }
    try {
      (void)model::sentencepiece_model_from_gguf(g);
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  return 0;
}
