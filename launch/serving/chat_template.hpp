#pragma once
// Chat templates: OpenAI chat messages -> prompt ids, for the three families Aerie serves.
// The family is read from the checkpoint (the Jinja template in chat_template.jinja or
// tokenizer_config.json's "chat_template":
// Llama-3 headers, Llama-2 [INST] blocks) or the tokenizer's special tokens, unless the
// user names one (--chat-template). Rendering is written out per family instead of
// interpreting Jinja; it produces what those templates produce for text messages.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/text_tokenizer.hpp"

namespace aerie::launch {

enum class ChatFamily { kLlama3, kLlama2, kPlain };

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

// "llama-3" | "llama-2" | "plain"; throws aerie::Error for other names.
ChatFamily parse_chat_family(const std::string& name);
const char* chat_family_name(ChatFamily f);
// The family of a model folder (see above); kPlain when nothing identifies one.
ChatFamily detect_chat_family(const std::filesystem::path& model_dir, const model::TextTokenizer* tokenizer);

class ChatTemplate {
 public:
  ChatTemplate(ChatFamily family, const model::TextTokenizer& tokenizer);
  // The prompt for `messages`, ending where the assistant's reply begins. The tokenizer adds
  // BOS as it does for any prompt. Throws aerie::Error for an empty list or an unknown role.
  std::vector<int32_t> render(const std::vector<ChatMessage>& messages) const;
  // Ids that end the assistant's turn besides the model's EOS (Llama-3: <|eot_id|>).
  std::vector<int32_t> stop_token_ids() const;
  ChatFamily family() const { return family_; }

 private:
  ChatFamily family_;
  const model::TextTokenizer& tok_;
};

}  // namespace aerie::launch
