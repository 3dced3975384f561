#pragma once
// Memory-mapped safetensors files and sharded checkpoints (model.safetensors.index.json).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/tensor.hpp"

namespace aerie::model {

struct TensorInfo {
  std::string name;
  std::string dtype_name;        // as written in the header ("BF16", "F32", ...)
  std::optional<DType> dtype;    // empty for dtypes Aerie does not read (F64, F8, ...)
  std::vector<int64_t> shape;
  const void* data = nullptr;    // into the mapping
  size_t nbytes = 0;
};

// One .safetensors file, mapped read-only. The constructor checks the whole header: its
// length, JSON, every dtype/shape/offset pair against the file. Errors name the file and
// the tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const TensorInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a checkpoint folder: model.safetensors, or the shards listed by
// model.safetensors.index.json.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::filesystem::path& dir);
  bool has(const std::string& name) const;
  // A host view of the tensor, checked against the expected shape; throws naming the
  // file and tensor when it is missing, has another shape, or a dtype Aerie cannot read.
  TensorView get(const std::string& name, std::initializer_list<int64_t> expected_shape) const;
  const TensorInfo& info(const std::string& name) const;
  std::string file_of(const std::string& name) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace aerie::model
