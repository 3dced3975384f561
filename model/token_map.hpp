#pragma once
// --speculative-token-map: the "hot" target tokens an EAGLE-1 head drafts from (sglang's
// FR-Spec style maps). The head's LM head keeps only those rows, so a draft step costs a
// fraction of the full vocabulary; draft id i stands for target id hot[i].
// Files: a JSON array of token ids, or a .safetensors file holding one integer tensor.
// sglang's .pt files are torch pickles, which Aerie does not read: convert one with
//   python -c "import torch,json,sys; json.dump(torch.load(sys.argv[1]).tolist(), open(sys.argv[2],'w'))" map.pt map.json
#include <cstdint>
#include <filesystem>
#include <vector>

namespace aerie::model {

// The ids, each in [0, vocab_size), unique and at least one; throws aerie::Error naming the
// file otherwise.
std::vector<int32_t> load_token_map(const std::filesystem::path& path, int64_t vocab_size);

}  // namespace aerie::model
