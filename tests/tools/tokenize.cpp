// aerie-tokenize TOKENIZER_JSON|FILE.gguf: reads one JSON string per line on stdin and prints
// {"ids": [...], "text": decode(ids), "stream": the incremental detokenizer's pieces joined,
// "pieces_valid_utf8": bool, "literal_ids": the ids with the whole text literal (special-token
// text encoded as text)} per line, for the parity test against the tokenizers package.
#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/gguf_file.hpp"
#include "model/text_tokenizer.hpp"

int main(int argc, char** argv) {
  using namespace aerie;
  try {
    AERIE_CHECK(argc == 2, "usage: aerie-tokenize TOKENIZER_JSON|FILE.gguf");
    if (model::GgufFile::is_gguf(argv[1]) && model::GgufFile(argv[1]).get_string("tokenizer.ggml.model") == "llama") {
      // A sentencepiece-style vocabulary: ids and decoded text only (no streaming detokenizer).
      const auto tok = model::load_text_tokenizer(argv[1]);
      std::string line;
      while (std::getline(std::cin, line)) {
        nlohmann::json out;
        try {
          const auto ids = tok->encode(nlohmann::json::parse(line).get<std::string>());
          out = {{"ids", ids}, {"text", tok->decode(ids)}};
        } catch (const std::exception& e) {
          out = {{"error", e.what()}};
        }
        std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      }
      return 0;
    }
    const model::BpeTokenizer tok = model::GgufFile::is_gguf(argv[1])
                                        ? model::BpeTokenizer(model::bpe_spec_from_gguf(model::GgufFile(argv[1])), argv[1])
                                        : model::BpeTokenizer(argv[1]);
    std::string line;
    while (std::getline(std::cin, line)) {
      const std::string text = nlohmann::json::parse(line).get<std::string>();
      nlohmann::json out;
      try {
        const auto ids = tok.encode(text);
        model::IncrementalDetokenizer inc(tok);
        std::string stream;
        bool valid = true;
        for (int32_t id : ids) {
          const std::string piece = inc.push({id});
          valid = valid && nlohmann::json(piece).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict).size() > 0;
          stream += piece;
        }
        stream += inc.finish();
        const std::vector<std::pair<size_t, size_t>> whole{{0, text.size()}};
        out = {{"ids", ids}, {"text", tok.decode(ids)}, {"stream", stream}, {"pieces_valid_utf8", valid},
               {"literal_ids", tok.encode(text, false, &whole)}};
      } catch (const std::exception& e) {
        out = {{"error", e.what()}};
      }
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "aerie-tokenize: " << e.what() << "\n";
    return 2;
  }
}
