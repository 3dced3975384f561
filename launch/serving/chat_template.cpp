#include "launch/serving/chat_template.hpp"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"

namespace aerie::launch {

ChatFamily parse_chat_family(const std::string& name) {
  if (name == "llama-3") return ChatFamily::kLlama3;
  if (name == "llama-2") return ChatFamily::kLlama2;
  if (name == "plain") return ChatFamily::kPlain;
  AERIE_FAIL("unknown chat template '" << name << "' (llama-3, llama-2 or plain)");
}

const char* chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::kLlama3: return "llama-3";
    case ChatFamily::kLlama2: return "llama-2";
    case ChatFamily::kPlain: return "plain";
  }
  return "plain";
}

namespace {
// The family a Jinja chat template writes: Llama-3 headers or Llama-2 [INST] blocks.
std::optional<ChatFamily> family_of_jinja(const std::string& tpl) {
  if (tpl.find("<|start_header_id|>") != std::string::npos) return ChatFamily::kLlama3;
  if (tpl.find("[INST]") != std::string::npos) return ChatFamily::kLlama2;
  return std::nullopt;
}
}  // namespace

ChatFamily detect_chat_family(const std::filesystem::path& dir, const model::TextTokenizer* tokenizer) {
  // transformers 5 saves the template as chat_template.jinja next to the config.
  if (std::ifstream jinja(dir / "chat_template.jinja"); jinja)
    if (auto f = family_of_jinja(std::string(std::istreambuf_iterator<char>(jinja), std::istreambuf_iterator<char>()))) return *f;
  std::ifstream in(dir / "tokenizer_config.json");
  if (in) {
    const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("chat_template")) {
      std::string tpl;
      if (j["chat_template"].is_string()) tpl = j["chat_template"].get<std::string>();
      else if (j["chat_template"].is_array())  // [{"name": "default", "template": ...}, ...]
        for (const auto& t : j["chat_template"])
          if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
            tpl = t["template"].get<std::string>();
      if (auto f = family_of_jinja(tpl)) return *f;
    }
  }
  if (tokenizer && tokenizer->token_id("<|start_header_id|>") >= 0 && tokenizer->token_id("<|eot_id|>") >= 0) return ChatFamily::kLlama3;
  return ChatFamily::kPlain;
}

ChatTemplate::ChatTemplate(ChatFamily family, const model::TextTokenizer& tokenizer) : family_(family), tok_(tokenizer) {
  if (family_ == ChatFamily::kLlama3)
    AERIE_CHECK(tok_.token_id("<|start_header_id|>") >= 0 && tok_.token_id("<|end_header_id|>") >= 0 && tok_.token_id("<|eot_id|>") >= 0,
                "the llama-3 chat template needs <|start_header_id|>, <|end_header_id|> and <|eot_id|> in the tokenizer");
}

std::vector<int32_t> ChatTemplate::stop_token_ids() const {
  if (family_ == ChatFamily::kLlama3) return {tok_.token_id("<|eot_id|>")};
  return {};
}

std::vector<int32_t> ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  AERIE_CHECK(!messages.empty(), "'messages' is empty");
  for (const auto& m : messages)
    AERIE_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant",
                "message role '" << m.role << "' is not one of system, user, assistant");
  switch (family_) {
    case ChatFamily::kLlama3: {
      // <|begin_of_text|> comes from the tokenizer's BOS.
      std::string text;
      for (const auto& m : messages) text += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return tok_.encode(text);
    }
    case ChatFamily::kLlama2: {
      // <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] ...
      // Each [INST] block is encoded on its own so it gets its BOS; answers end with EOS.
      std::string system;
      size_t i = 0;
      if (messages[0].role == "system") system = messages[0].content, i = 1;
      const int32_t eos = tok_.token_id("</s>");
      std::vector<int32_t> ids;
      bool first = true;
      for (; i < messages.size(); ++i) {
        const auto& m = messages[i];
        if (m.role == "user") {
          std::string block = "[INST] ";
          if (first && !system.empty()) block += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
          block += m.content + " [/INST]";
          const auto part = tok_.encode(block);
          ids.insert(ids.end(), part.begin(), part.end());
          first = false;
        } else {
          AERIE_CHECK(m.role == "assistant", "llama-2 chats allow one system message, first");
          AERIE_CHECK(!first, "a llama-2 chat starts with a user message");
          auto part = tok_.encode(" " + m.content + " ");
          // The answer continues the [INST] block: drop the BOS the tokenizer added.
          if (!part.empty() && !ids.empty() && part.front() == ids.front()) part.erase(part.begin());
          ids.insert(ids.end(), part.begin(), part.end());
          if (eos >= 0) ids.push_back(eos);
        }
      }
      AERIE_CHECK(!ids.empty(), "a llama-2 chat needs a user message");
      return ids;
    }
    case ChatFamily::kPlain: {
      std::string text;
      for (const auto& m : messages) {
        std::string role = m.role;
        role[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(role[0])));
        text += role + ": " + m.content + "\n";
      }
      text += "Assistant:";
      return tok_.encode(text);
    }
  }
  return {};
}

}  // namespace aerie::launch
