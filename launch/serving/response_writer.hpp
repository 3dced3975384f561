#pragma once
// ResponseWriter: the reply of one request in the shape its endpoint promises, built from
// RequestSession updates.
//   sglang /generate: {"text", "output_ids", "meta_info": {"id", "finish_reason",
//     "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency", "spec_verify_ct",
//     ["output_token_logprobs", "output_top_logprobs"]}}; streamed chunks carry the text and
//     ids so far (sglang's default, which bench_serving reads).
//   OpenAI: text_completion / chat.completion objects, and their streamed chunks
//     (chat: a first chunk with the assistant role, deltas, a last chunk with the finish
//     reason, and with stream_options.include_usage a usage chunk with no choices).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launch/serving/json_request.hpp"
#include "launch/serving/request_session.hpp"

namespace aerie::launch {

class ResponseWriter {
 public:
  ResponseWriter(const ParsedRequest& request, std::string id, std::string model_name, const model::TextTokenizer* tokenizer);
  // Streaming: the SSE payloads for one update (zero or more; `[DONE]` is the caller's).
  std::vector<nlohmann::json> chunks(const SessionUpdate& u, double e2e_seconds);
  // Plain reply: the whole body, after the session finished (u is its last update).
  nlohmann::json body(const SessionUpdate& last, double e2e_seconds);
  // Accumulates an update without writing (the plain reply's path).
  void absorb(const SessionUpdate& u);

 private:
  nlohmann::json meta_info(const SessionUpdate* last, double e2e_seconds) const;
  nlohmann::json finish_reason_sglang(const SessionUpdate& last) const;
  std::string finish_reason_openai(const SessionUpdate& last) const;
  nlohmann::json logprobs_sglang() const;
  nlohmann::json logprobs_completion(size_t from, size_t text_offset) const;
  nlohmann::json logprobs_chat(size_t from) const;
  nlohmann::json usage() const;
  nlohmann::json openai_base(const char* object) const;
  std::string token_text(int32_t id) const;

  ApiKind kind_;
  bool return_logprob_;
  bool text_in_logprobs_;
  bool include_usage_;
  std::string id_;
  std::string model_;
  int64_t created_;
  const model::TextTokenizer* tok_;
  int64_t prompt_tokens_;
  std::string text_;
  std::vector<int32_t> ids_;
  std::vector<transport::TokenLogprobs> logprobs_;
  bool sent_role_ = false;
};

}  // namespace aerie::launch
