#include "launch/serving/chat_template.hpp"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "model/gguf_file.hpp"

namespace aerie::launch {

namespace {

// Built-ins for models that ship no template, written as those families' templates write them.
struct Builtin {
  const char* name;
  const char* text;
};
constexpr Builtin kBuiltins[] = {
    {"llama-3",
     "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}<|eot_id|>"
     "{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"},
    {"llama-2",
     "{% if messages[0].role == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0].content %}"
     "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
     "{% for message in loop_messages %}{% if (message.role == 'user') != (loop.index0 % 2 == 0) %}"
     "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
     "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message.content %}"
     "{% else %}{% set content = message.content %}{% endif %}"
     "{% if message.role == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{% elif message.role == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
    {"chatml",
     "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"plain",
     "{{ bos_token }}{% for m in messages %}{{ m.role | capitalize }}: {{ m.content }}\n{% endfor %}"
     "{% if add_generation_prompt %}Assistant:{% endif %}"},
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  AERIE_CHECK(in.good(), p.string() << ": cannot open the chat template");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// tokenizer_config.json's chat_template: a string, or a list of named templates ("default").
std::string template_in_tokenizer_config(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return "";
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("chat_template")) return "";
  const auto& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const auto& e : t)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
        return e["template"].get<std::string>();
  return "";
}

}  // namespace

std::vector<std::string> builtin_chat_templates() {
  std::vector<std::string> out;
  for (const auto& b : kBuiltins) out.emplace_back(b.name);
  return out;
}

ChatTemplateSource find_chat_template(const std::string& choice, const std::filesystem::path& model) {
  if (!choice.empty()) {
    for (const auto& b : kBuiltins)
      if (choice == b.name) return {b.name, b.text};
    if (std::filesystem::is_regular_file(choice)) return {choice, read_file(choice)};
    std::string names;
    for (const auto& n : builtin_chat_templates()) names += (names.empty() ? "" : ", ") + n;
    AERIE_FAIL("--chat-template '" << choice << "' is neither a file nor a built-in template (" << names << ")");
  }
  if (model::GgufFile::is_gguf(model)) {
    model::GgufFile f(model);
    if (f.has("tokenizer.chat_template")) return {model.string() + " (tokenizer.chat_template)", f.get_string("tokenizer.chat_template")};
  } else if (!model.empty()) {
    // transformers 5 saves the template as chat_template.jinja next to the config.
    if (std::filesystem::exists(model / "chat_template.jinja")) return {(model / "chat_template.jinja").string(), read_file(model / "chat_template.jinja")};
    if (auto t = template_in_tokenizer_config(model / "tokenizer_config.json"); !t.empty())
      return {(model / "tokenizer_config.json").string(), t};
  }
  return {"plain", kBuiltins[3].text};
}

ChatTemplate::ChatTemplate(const ChatTemplateSource& source, const model::TextTokenizer& tokenizer, std::string bos_token,
                           std::string eos_token)
    : name_(source.name), template_(source.text), tok_(tokenizer), bos_(std::move(bos_token)), eos_(std::move(eos_token)) {}

std::string ChatTemplate::render_text(const std::vector<ChatMessage>& messages) const {
  AERIE_CHECK(!messages.empty(), "'messages' is empty");
  jinja::Value ms = jinja::Value::array();
  for (const auto& m : messages) ms.push_back({{"role", m.role}, {"content", m.content}});
  const jinja::Value ctx = {{"messages", ms}, {"add_generation_prompt", true}, {"bos_token", bos_}, {"eos_token", eos_}};
  return template_.render(ctx);
}

std::vector<int32_t> ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  // The template writes BOS itself where the model wants one (transformers encodes the
  // rendered text with add_special_tokens=False).
  return tok_.encode(render_text(messages), /*add_special=*/false);
}

std::vector<int32_t> ChatTemplate::stop_token_ids() const {
  std::vector<int32_t> out;
  for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"})
    if (const int32_t id = tok_.token_id(t); id >= 0) out.push_back(id);
  return out;
}

}  // namespace aerie::launch
