// A client's HTTP body: the depth-capped JSON parser, then sglang's /generate, OpenAI's
// completions and chat parsers (text prompts through a tokenizer, chats through a template).
#include <memory>
#include <string>

#include "fuzz_tokenizer.hpp"
#include "kernels/error.hpp"
#include "launch/serving/json_request.hpp"
#include "launch/serving/chat_template.hpp"
#include "model/text_tokenizer.hpp"

using namespace aerie;

namespace {
// The TextTokenizer the parsers take, over the fuzz tokenizer.
class Tok final : public model::TextTokenizer {
 public:
  Tok() : tok_(fuzz_tokenizer_spec(), "fuzz") {}
  std::vector<int32_t> encode(const std::string& t, bool add_special) const override { return tok_.encode(t, add_special); }
  std::string decode(const std::vector<int32_t>& ids) const override { return tok_.decode(ids); }
  std::string decode_output(const std::vector<int32_t>& ids) const override { return tok_.decode(ids, true); }
  int32_t token_id(const std::string& t) const override { return tok_.added_token_id(t); }
  std::string token_text(int32_t id) const override { return tok_.decode({id}); }

 private:
  model::BpeTokenizer tok_;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tok tok;
  static const launch::ChatTemplate chat(launch::find_chat_template("llama-3", ""), tok, "<|begin_of_text|>", "<|eot_id|>");
  const launch::RequestLimits limits{.vocab_size = 270, .max_total_tokens = 4096, .tokenizer = &tok};
  try {
    const auto body = launch::parse_client_json(std::string(reinterpret_cast<const char*>(data), size));
    try {
      (void)launch::parse_generate_request(body, limits);
    } catch (const Error&) {
    }
    try {
      (void)launch::parse_completion_request(body, limits);
    } catch (const Error&) {
    }
    try {
      (void)launch::parse_chat_request(body, limits, &chat);
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  return 0;
}
