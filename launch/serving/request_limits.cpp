// The request limits of a running deployment, apart from the parsers (launch/serving/json_request.cpp)
// so those build without the engine (the fuzz harnesses in tests/fuzz link them alone).
#include <algorithm>

#include "launch/deployment.hpp"
#include "launch/serving/json_request.hpp"

namespace aerie::launch {

RequestLimits request_limits(const Deployment& deployment, const model::TextTokenizer* tokenizer) {
  // The scheduler needs prompt + max_new_tokens - 1 KV slots and at most the context.
  const auto& c = deployment.config();
  return {.vocab_size = c.vocab_size,
          .max_total_tokens = std::min<int64_t>(c.max_position_embeddings, deployment.kv_capacity_tokens() + 1),
          .tokenizer = tokenizer};
}

}  // namespace aerie::launch
