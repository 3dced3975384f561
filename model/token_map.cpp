#include "model/token_map.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "kernels/dtype.hpp"
#include "kernels/error.hpp"
#include "model/safetensors.hpp"

namespace aerie::model {

namespace {

std::vector<int64_t> read_json_ids(const std::filesystem::path& path) {
  std::ifstream in(path);
  AERIE_CHECK(in, path.string() << ": cannot open the token map");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  AERIE_CHECK(!j.is_discarded() && j.is_array(), path.string() << ": a JSON token map must be an array of token ids");
  std::vector<int64_t> ids;
  for (const auto& v : j) {
    AERIE_CHECK(v.is_number_integer(), path.string() << ": token map entry " << v.dump() << " is not an integer");
    ids.push_back(v.get<int64_t>());
  }
  return ids;
}

std::vector<int64_t> read_safetensors_ids(const std::filesystem::path& path) {
  SafetensorsFile file(path);
  const auto names = file.names();
  AERIE_CHECK(names.size() == 1, path.string() << ": a safetensors token map holds one tensor, found " << names.size());
  const TensorInfo& t = *file.find(names[0]);
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  AERIE_CHECK(t.shape.size() == 1, path.string() << ": tensor '" << t.name << "' must be one-dimensional");
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype_name == "I64") {
      ids[static_cast<size_t>(i)] = load_unaligned<int64_t>(t.data, i);
    } else if (t.dtype_name == "I32") {
      ids[static_cast<size_t>(i)] = load_unaligned<int32_t>(t.data, i);
    } else {
      AERIE_FAIL(path.string() << ": tensor '" << t.name << "' is " << t.dtype_name << "; a token map holds I64 or I32 ids");
    }
  }
  return ids;
}

}  // namespace

std::vector<int32_t> load_token_map(const std::filesystem::path& path, int64_t vocab_size) {
  const std::string ext = path.extension().string();
  AERIE_CHECK(ext != ".pt" && ext != ".pth",
              path.string() << ": Aerie does not read torch pickles; convert the map to JSON: python -c \"import torch,json,sys; "
                               "json.dump(torch.load(sys.argv[1]).tolist(), open(sys.argv[2],'w'))\" "
                            << path.string() << " map.json");
  const std::vector<int64_t> raw = ext == ".safetensors" ? read_safetensors_ids(path) : read_json_ids(path);
  AERIE_CHECK(!raw.empty(), path.string() << ": the token map is empty");
  std::vector<int32_t> ids;
  std::unordered_set<int64_t> seen;
  for (int64_t id : raw) {
    AERIE_CHECK(id >= 0 && id < vocab_size, path.string() << ": token id " << id << " is outside the vocabulary of " << vocab_size);
    AERIE_CHECK(seen.insert(id).second, path.string() << ": token id " << id << " appears twice");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace aerie::model
