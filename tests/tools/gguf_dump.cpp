// aerie-gguf-dump FILE: prints one JSON object: the metadata keys and every tensor of a GGUF
// file (name, type, shape, values dequantized by Aerie), or {"error": message} with exit
// code 1 when Aerie refuses the file. For the parity and fuzz test against gguf's Python package.
#include <iostream>
#include <nlohmann/json.hpp>

#include "model/gguf_file.hpp"

int main(int argc, char** argv) {
  using namespace aerie;
  if (argc != 2) {
    std::cerr << "usage: aerie-gguf-dump FILE\n";
    return 2;
  }
  try {
    model::GgufFile f(argv[1]);
    nlohmann::json out;
    out["version"] = f.version();
    out["metadata_keys"] = nlohmann::json::array();
    for (auto it = f.metadata().begin(); it != f.metadata().end(); ++it) out["metadata_keys"].push_back(it.key());
    out["tensors"] = nlohmann::json::array();
    for (const auto& t : f.tensors()) {
      std::vector<float> values(static_cast<size_t>(t.numel()));
      model::gguf_dequantize(t.type, t.data, t.numel(), values.data());
      out["tensors"].push_back({{"name", t.name}, {"type", model::gguf_type_name(t.type)}, {"shape", t.shape()}, {"values", values}});
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cout << nlohmann::json{{"error", e.what()}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 1;
  }
}
