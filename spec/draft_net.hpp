#pragma once
// DraftNet: the draft model a runner drives, an EAGLE / EAGLE3 head over the target's hidden
// states or a STANDALONE small Llama, behind the few calls every draft runner (chain, tree,
// extend) makes of it.
#include <memory>

#include "kernels/tensor.hpp"
#include "model/eagle_head.hpp"
#include "model/forward_workspace.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"

namespace aerie::spec {

struct DraftNet {
  model::EagleHead* head = nullptr;
  model::LlamaModel* standalone = nullptr;

  bool eagle() const { return head != nullptr; }
  // Throws aerie::Error unless exactly one is set; `who` names the runner.
  void check(const char* who) const;
  std::unique_ptr<model::ForwardWorkspace> make_workspace(const model::ForwardCapacity& cap) const;
  // The model whose attention geometry (splits, tokens per block) the draft's forwards follow:
  // the standalone model, or the target (whose heads an EAGLE head shares).
  const model::LlamaModel& geometry(const model::LlamaModel& target) const { return standalone ? *standalone : target; }
  // One forward over the workspace's uploaded batch; in_hidden: an EAGLE head's input hidden
  // states (ignored for STANDALONE). Returns the logits.
  TensorView run(model::ForwardWorkspace& ws, const TensorView& in_hidden, model::KvCache& kv, const model::ForwardDims& dims) const;
};

}  // namespace aerie::spec
