#include "launch/serving/chat_template.hpp"

#include <fstream>
#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string_view>

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
    : name_(source.name),
      template_(source.text),
      tok_(tokenizer),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      specials_(tokenizer.special_token_texts()) {}

std::string ChatTemplate::render_text(const std::vector<ChatMessage>& messages) const {
  AERIE_CHECK(!messages.empty(), "'messages' is empty");
  jinja::Value ms = jinja::Value::array();
  for (const auto& m : messages) ms.push_back({{"role", m.role}, {"content", m.content}});
  const jinja::Value ctx = {{"messages", ms}, {"add_generation_prompt", true}, {"bos_token", bos_}, {"eos_token", eos_}};
  return template_.render(ctx);
}

namespace {

// Stand-ins for special-token text typed in a message: U+E000, the text's index, U+E001
// (private-use characters, which templates pass through untouched).
constexpr std::string_view kMarkOpen = "\xEE\x80\x80";
constexpr std::string_view kMarkClose = "\xEE\x80\x81";

// `content` with every special token's text (leftmost, longest first) replaced by a stand-in
// whose index points into `originals`.
std::string mark_specials(const std::string& content, const std::vector<std::string>& specials, std::vector<std::string>& originals) {
  std::vector<const std::string*> present;
  for (const auto& sp : specials)
    if (!sp.empty() && content.find(sp) != std::string::npos) present.push_back(&sp);
  if (present.empty()) return content;
  std::string out;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t best = std::string::npos;
    const std::string* hit = nullptr;
    for (const auto* sp : present) {
      const size_t f = content.find(*sp, pos);
      if (f < best || (f == best && f != std::string::npos && sp->size() > hit->size())) best = f, hit = sp;
    }
    if (!hit) break;
    out.append(content, pos, best - pos);
    out += kMarkOpen;
    out += std::to_string(originals.size());
    out += kMarkClose;
    originals.push_back(*hit);
    pos = best + hit->size();
  }
  out.append(content, std::min(pos, content.size()), std::string::npos);
  return out;
}

}  // namespace

std::vector<int32_t> ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  // The template writes BOS itself where the model wants one (transformers encodes the
  // rendered text with add_special_tokens=False). Special-token text that a message
  // carries stays text: rendered through stand-ins, put back, and encoded as literal, so a
  // client typing "<|im_end|><|im_start|>system" gets those characters, not a turn of its own.
  std::vector<std::string> originals;
  std::vector<ChatMessage> marked = messages;
  for (auto& m : marked) m.content = mark_specials(m.content, specials_, originals);
  if (originals.empty()) return tok_.encode(render_text(messages), /*add_special=*/false);
  const std::string rendered = render_text(marked);
  std::string text;
  model::TextTokenizer::LiteralRanges literal;
  size_t pos = 0;
  while (pos < rendered.size()) {
    const size_t open = rendered.find(kMarkOpen, pos);
    const size_t close = open == std::string::npos ? open : rendered.find(kMarkClose, open);
    size_t index = originals.size();
    if (close != std::string::npos) {
      const std::string digits = rendered.substr(open + kMarkOpen.size(), close - open - kMarkOpen.size());
      if (!digits.empty() && digits.size() < 10 && digits.find_first_not_of("0123456789") == std::string::npos) index = std::stoul(digits);
    }
    if (index >= originals.size()) {  // no (well-formed) stand-in left: the rest as rendered
      const size_t upto = open == std::string::npos ? rendered.size() : open + kMarkOpen.size();
      text.append(rendered, pos, upto - pos);
      pos = upto;
      continue;
    }
    text.append(rendered, pos, open - pos);
    literal.emplace_back(text.size(), text.size() + originals[index].size());
    text += originals[index];
    pos = close + kMarkClose.size();
  }
  return tok_.encode_with_literals(text, /*add_special=*/false, literal);
}

std::vector<int32_t> ChatTemplate::stop_token_ids() const {
  std::vector<int32_t> out;
  for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"})
    if (const int32_t id = tok_.token_id(t); id >= 0) out.push_back(id);
  return out;
}

}  // namespace aerie::launch
