#include "model/tp_shard.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::model {

int64_t TpShard::real_vocab_rows(int64_t vocab) const {
  return std::clamp<int64_t>(vocab - first_vocab(vocab), 0, vocab_rows(vocab));
}

LlamaConfig TpShard::local(const LlamaConfig& c) const {
  LlamaConfig l = c;
  l.num_heads = heads(c);
  l.num_kv_heads = kv_heads(c);
  l.intermediate_size = intermediate(c);
  return l;
}

void TpShard::check_divisible(const LlamaConfig& c, int size, const std::string& what) {
  AERIE_CHECK(size >= 1, "--tp-size must be >= 1");
  if (size == 1) return;
  AERIE_CHECK(c.num_heads % size == 0, "--tp-size " << size << ": " << what << "'s " << c.num_heads
                                                    << " attention heads do not divide over " << size << " ranks");
  AERIE_CHECK(c.num_kv_heads % size == 0 || size % c.num_kv_heads == 0,
              "--tp-size " << size << ": " << what << "'s " << c.num_kv_heads << " KV heads neither divide over " << size
                           << " ranks nor replicate evenly onto them");
  AERIE_CHECK(c.intermediate_size % size == 0, "--tp-size " << size << ": " << what << "'s intermediate size " << c.intermediate_size
                                                            << " does not divide over " << size << " ranks");
  AERIE_CHECK(c.vocab_size >= size, "--tp-size " << size << ": " << what << "'s vocabulary of " << c.vocab_size << " is smaller than the TP group");
}

}  // namespace aerie::model
