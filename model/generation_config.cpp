#include "model/generation_config.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"

namespace aerie::model {

GenerationConfig load_generation_config(const std::filesystem::path& dir) {
  GenerationConfig g;
  const auto path = dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) || !std::filesystem::exists(path, ec)) return g;
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  AERIE_CHECK(j.is_object(), path.string() << ": not a JSON object");
  auto number = [&](const char* key, auto& out, double lo, double hi) {
    if (!j.contains(key) || j[key].is_null()) return;
    AERIE_CHECK(j[key].is_number() && j[key].get<double>() >= lo && j[key].get<double>() <= hi,
                path.string() << ": '" << key << "' must be a number in [" << lo << ", " << hi << "]");
    out = static_cast<std::remove_reference_t<decltype(out)>>(j[key].get<double>());
  };
  number("temperature", g.sampling.temperature, 0.0, 1e6);
  number("top_p", g.sampling.top_p, 1e-9, 1.0);
  number("top_k", g.sampling.top_k, -1.0, 1e9);
  number("min_p", g.sampling.min_p, 0.0, 1.0);
  if (g.sampling.top_k == 0) g.sampling.top_k = -1;  // transformers' 0 means "off", as Aerie's -1
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const auto& e = j["eos_token_id"];
    auto add = [&](const nlohmann::json& v) {
      AERIE_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t{1} << 31),
                  path.string() << ": eos_token_id entries must be non-negative integers");
      g.eos_token_ids.push_back(v.get<int32_t>());
    };
    if (e.is_array())
      for (const auto& v : e) add(v);
    else
      add(e);
  }
  return g;
}

}  // namespace aerie::model
