#pragma once
// Chat templates: OpenAI chat messages -> prompt ids, by rendering the checkpoint's own Jinja
// chat template (launch/jinja) the way transformers' apply_chat_template does, then encoding
// the text without adding BOS/EOS (the template writes its own). The template comes from
// --chat-template (a built-in name or a .jinja file), else the model: chat_template.jinja,
// tokenizer_config.json's "chat_template", or a GGUF file's tokenizer.chat_template; a model
// without one gets the built-in "plain" template.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "launch/jinja/template.hpp"
#include "model/text_tokenizer.hpp"

namespace aerie::launch {

struct ChatMessage {
  std::string role;  // system | user | assistant | tool ...: what the template accepts
  std::string content;
};

// The names --chat-template accepts besides a file: llama-3, llama-2, chatml, plain.
std::vector<std::string> builtin_chat_templates();

struct ChatTemplateSource {
  std::string name;  // the built-in's name, the file, or where in the model it was found
  std::string text;  // Jinja source
};
// `choice` is --chat-template (empty: the model's own). Throws aerie::Error for an unknown
// name or an unreadable file.
ChatTemplateSource find_chat_template(const std::string& choice, const std::filesystem::path& model_path);

class ChatTemplate {
 public:
  // Throws aerie::Error naming the line of a template the Jinja subset cannot parse.
  ChatTemplate(const ChatTemplateSource& source, const model::TextTokenizer& tokenizer, std::string bos_token, std::string eos_token);
  // The text of the prompt for `messages`, ending where the assistant's reply begins.
  std::string render_text(const std::vector<ChatMessage>& messages) const;
  // Its ids. Special-token text inside a message's content is encoded as plain text (no role
  // spoofing); the template's own special tokens are tokens. Throws aerie::Error for an
  // empty list or what the template rejects (raise_exception's message, e.g. roles that do
  // not alternate).
  std::vector<int32_t> render(const std::vector<ChatMessage>& messages) const;
  // End-of-turn ids the tokenizer has besides the model's EOS (<|eot_id|>, <|im_end|>, ...).
  std::vector<int32_t> stop_token_ids() const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  jinja::Template template_;
  const model::TextTokenizer& tok_;
  std::string bos_, eos_;
  std::vector<std::string> specials_;  // special-token texts the tokenizer matches in text
};

}  // namespace aerie::launch
