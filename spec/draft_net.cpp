#include "spec/draft_net.hpp"

#include "kernels/error.hpp"

namespace aerie::spec {

void DraftNet::check(const char* who) const {
  AERIE_CHECK((head != nullptr) != (standalone != nullptr), who << " drafts with a head or a standalone model");
}

std::unique_ptr<model::ForwardWorkspace> DraftNet::make_workspace(const model::ForwardCapacity& cap) const {
  return head ? head->make_workspace(cap) : standalone->make_workspace(cap);
}

TensorView DraftNet::run(model::ForwardWorkspace& ws, const TensorView& in_hidden, model::KvCache& kv, const model::ForwardDims& dims) const {
  return head ? head->run(ws, in_hidden, kv, dims) : standalone->run(ws, kv, dims);
}

}  // namespace aerie::spec
