#pragma once
// A GGUF file (llama.cpp's format, versions 2 and 3), memory-mapped read-only: the metadata
// key/values and the tensor table, every length, count, type and offset checked against the
// file before anything is read through it. Errors name the file and what is wrong.
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/weight_blocks.hpp"

namespace aerie::model {

// The tensor types Aerie reads (ggml_type values). Others are named in errors and refused.
enum class GgufType : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kBF16 = 30 };

struct GgufTensor {
  std::string name;
  uint32_t type = 0;             // ggml_type as stored
  std::vector<int64_t> dims;     // GGUF order: dims[0] varies fastest
  const unsigned char* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
  // The shape as row-major frameworks write it (dims reversed): [rows, cols].
  std::vector<int64_t> shape() const;
};

class GgufFile {
 public:
  explicit GgufFile(const std::filesystem::path& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // True for a path that names a file beginning with the GGUF magic.
  static bool is_gguf(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  // Metadata: numbers, booleans, strings and arrays of them, as JSON values.
  const nlohmann::json& metadata() const;
  bool has(const std::string& key) const;
  // The value of a key, checked to be of the expected kind; throws naming file and key.
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  const nlohmann::json& get_array(const std::string& key) const;

  const GgufTensor* find(const std::string& name) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

 private:
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  std::unique_ptr<nlohmann::json> meta_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> by_name_;
};

// "Q4_1", "F16", ... for a ggml_type value ("type 17" for ones Aerie does not know).
std::string gguf_type_name(uint32_t type);
// Elements per block and bytes per block of a type Aerie reads; throws for others.
int64_t gguf_block_elements(uint32_t type);
int64_t gguf_block_bytes(uint32_t type);
// The block format of a quantized type (Q4_0, Q4_1, Q8_0; kernels/weight_blocks.hpp), nothing
// for the others.
std::optional<kernels::BlockFormat> gguf_block_format(uint32_t type);
// Decodes n elements (a whole number of blocks) of `type` at src into floats.
void gguf_dequantize(uint32_t type, const unsigned char* src, int64_t n, float* out);

}  // namespace aerie::model
