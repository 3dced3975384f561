#include "launch/serving/response_writer.hpp"

#include <chrono>

namespace aerie::launch {

using nlohmann::json;

ResponseWriter::ResponseWriter(const ParsedRequest& request, std::string id, std::string model_name, const model::TextTokenizer* tokenizer)
    : kind_(request.kind),
      return_logprob_(request.return_logprob),
      text_in_logprobs_(request.return_text_in_logprobs),
      include_usage_(request.include_usage),
      id_(std::move(id)),
      model_(std::move(model_name)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      tok_(tokenizer),
      prompt_tokens_(static_cast<int64_t>(request.request.prompt.size())) {}

void ResponseWriter::absorb(const SessionUpdate& u) {
  text_ += u.text;
  ids_.insert(ids_.end(), u.ids.begin(), u.ids.end());
  logprobs_.insert(logprobs_.end(), u.logprobs.begin(), u.logprobs.end());
}

std::string ResponseWriter::token_text(int32_t id) const { return tok_ ? valid_utf8(tok_->decode({id})) : std::string(); }

json ResponseWriter::finish_reason_sglang(const SessionUpdate& last) const {
  json f{{"type", last.result.finish_reason}};
  if (last.matched_stop) f["matched"] = *last.matched_stop;
  else if (last.result.finish_reason == "stop" && !last.result.output_ids.empty()) f["matched"] = last.result.output_ids.back();
  if (last.result.finish_reason == "length") f["length"] = last.result.output_ids.size();
  return f;
}

std::string ResponseWriter::finish_reason_openai(const SessionUpdate& last) const {
  return last.result.finish_reason;  // "stop" | "length" | "abort"
}

json ResponseWriter::logprobs_sglang() const {
  json out = json::array(), top = json::array();
  for (size_t i = 0; i < logprobs_.size(); ++i) {
    // [logprob, token id, token text or null] as sglang; the text with return_text_in_logprobs.
    auto text = [&](int32_t id) { return text_in_logprobs_ ? json(token_text(id)) : json(); };
    out.push_back(json::array({logprobs_[i].logprob, ids_[i], text(ids_[i])}));
    json t = json::array();
    for (size_t k = 0; k < logprobs_[i].top_ids.size(); ++k)
      t.push_back(json::array({logprobs_[i].top_logprobs[k], logprobs_[i].top_ids[k], text(logprobs_[i].top_ids[k])}));
    top.push_back(std::move(t));
  }
  return {{"output_token_logprobs", out}, {"output_top_logprobs", top}};
}

json ResponseWriter::logprobs_completion(size_t from, size_t text_offset) const {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = from; i < logprobs_.size(); ++i) {
    const std::string t = token_text(ids_[i]);
    tokens.push_back(t);
    lps.push_back(logprobs_[i].logprob);
    json top = json::object();
    for (size_t k = 0; k < logprobs_[i].top_ids.size(); ++k) top[token_text(logprobs_[i].top_ids[k])] = logprobs_[i].top_logprobs[k];
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json ResponseWriter::logprobs_chat(size_t from) const {
  auto entry = [&](int32_t id, float lp) {
    const std::string raw = tok_ ? tok_->decode({id}) : std::string();
    std::vector<int> bytes(raw.begin(), raw.end());
    for (int& b : bytes) b &= 0xFF;
    return json{{"token", valid_utf8(raw)}, {"logprob", lp}, {"bytes", bytes}};
  };
  json content = json::array();
  for (size_t i = from; i < logprobs_.size(); ++i) {
    json e = entry(ids_[i], logprobs_[i].logprob);
    json top = json::array();
    for (size_t k = 0; k < logprobs_[i].top_ids.size(); ++k) top.push_back(entry(logprobs_[i].top_ids[k], logprobs_[i].top_logprobs[k]));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", content}};
}

json ResponseWriter::usage() const {
  const auto n = static_cast<int64_t>(ids_.size());
  return {{"prompt_tokens", prompt_tokens_}, {"completion_tokens", n}, {"total_tokens", prompt_tokens_ + n}};
}

json ResponseWriter::meta_info(const SessionUpdate* last, double e2e) const {
  json m{{"id", id_},
         {"finish_reason", last ? finish_reason_sglang(*last) : json()},
         {"prompt_tokens", prompt_tokens_},
         {"completion_tokens", ids_.size()},
         {"cached_tokens", last ? last->result.cached_tokens : 0},  // prompt tokens shared with another request
         {"e2e_latency", e2e},
         {"spec_verify_ct", last ? last->result.spec_verify_ct : 0}};
  if (return_logprob_) m.update(logprobs_sglang());
  return m;
}

json ResponseWriter::openai_base(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json ResponseWriter::body(const SessionUpdate& last, double e2e) {
  switch (kind_) {
    case ApiKind::kGenerate: {
      json out{{"output_ids", ids_}, {"meta_info", meta_info(&last, e2e)}};
      if (tok_) out["text"] = text_;
      return out;
    }
    case ApiKind::kCompletion: {
      json out = openai_base("text_completion");
      json choice{{"index", 0}, {"text", text_}, {"logprobs", return_logprob_ ? logprobs_completion(0, 0) : json()},
                  {"finish_reason", finish_reason_openai(last)}, {"matched_stop", last.matched_stop ? json(*last.matched_stop) : json()}};
      out["choices"] = json::array({choice});
      out["usage"] = usage();
      return out;
    }
    case ApiKind::kChat: {
      json out = openai_base("chat.completion");
      json choice{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text_}}},
                  {"logprobs", return_logprob_ ? logprobs_chat(0) : json()}, {"finish_reason", finish_reason_openai(last)},
                  {"matched_stop", last.matched_stop ? json(*last.matched_stop) : json()}};
      out["choices"] = json::array({choice});
      out["usage"] = usage();
      return out;
    }
  }
  return {};
}

std::vector<json> ResponseWriter::chunks(const SessionUpdate& u, double e2e) {
  const size_t from = logprobs_.size();
  const size_t text_offset = text_.size();
  absorb(u);
  std::vector<json> out;
  switch (kind_) {
    case ApiKind::kGenerate: {
      if (u.ids.empty() && !u.finished) return out;
      json c{{"output_ids", ids_}, {"meta_info", meta_info(u.finished ? &u : nullptr, e2e)}};
      if (tok_) c["text"] = text_;
      out.push_back(std::move(c));
      return out;
    }
    case ApiKind::kCompletion: {
      if (!u.text.empty() || !u.ids.empty() || u.finished) {
        json c = openai_base("text_completion");
        c["choices"] = json::array({json{{"index", 0},
                                         {"text", u.text},
                                         {"logprobs", return_logprob_ ? logprobs_completion(from, text_offset) : json()},
                                         {"finish_reason", u.finished ? json(finish_reason_openai(u)) : json()},
                                         {"matched_stop", u.matched_stop ? json(*u.matched_stop) : json()}}});
        if (include_usage_) c["usage"] = nullptr;
        out.push_back(std::move(c));
      }
      break;
    }
    case ApiKind::kChat: {
      auto chunk = [&](json delta, json finish, json logprobs) {
        json c = openai_base("chat.completion.chunk");
        c["choices"] = json::array({json{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish)}}});
        if (include_usage_) c["usage"] = nullptr;
        return c;
      };
      if (!sent_role_) {
        sent_role_ = true;
        out.push_back(chunk({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
      }
      if (!u.text.empty() || !u.ids.empty())
        out.push_back(chunk({{"content", u.text}}, nullptr, return_logprob_ ? logprobs_chat(from) : json()));
      if (u.finished) {
        json last = chunk(json::object(), finish_reason_openai(u), nullptr);
        last["choices"][0]["matched_stop"] = u.matched_stop ? json(*u.matched_stop) : json();
        out.push_back(std::move(last));
      }
      break;
    }
  }
  if (u.finished && include_usage_) {
    json c = openai_base(kind_ == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
    c["choices"] = json::array();
    c["usage"] = usage();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace aerie::launch
