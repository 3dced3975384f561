#include "model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kernels/error.hpp"

namespace aerie::model {

namespace {

using nlohmann::json;
constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format caps headers at 100 MB

struct DTypeSpec {
  const char* name;
  std::optional<DType> dtype;
  size_t size;
};
constexpr DTypeSpec kDTypes[] = {
    {"F32", DType::kF32, 4}, {"BF16", DType::kBF16, 2}, {"F16", DType::kF16, 2}, {"I32", DType::kI32, 4},
    {"I64", DType::kI64, 8}, {"U8", DType::kU8, 1},     {"BOOL", DType::kU8, 1}, {"F64", std::nullopt, 8},
    {"I8", std::nullopt, 1}, {"I16", std::nullopt, 2},  {"U16", std::nullopt, 2}, {"U32", std::nullopt, 4},
    {"U64", std::nullopt, 8}, {"F8_E4M3", std::nullopt, 1}, {"F8_E5M2", std::nullopt, 1}};

const DTypeSpec* find_dtype(const std::string& name) {
  for (const auto& s : kDTypes)
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const std::string where = path.string();
  int fd = ::open(where.c_str(), O_RDONLY);
  AERIE_CHECK(fd >= 0, where << ": cannot open (" << std::strerror(errno) << ")");
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    AERIE_FAIL(where << ": cannot stat");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    AERIE_FAIL(where << ": too short to be a safetensors file (" << size_ << " bytes)");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  AERIE_CHECK(map_ != MAP_FAILED, where << ": mmap failed (" << std::strerror(errno) << ")");
  try {
    const auto* bytes = static_cast<const unsigned char*>(map_);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little endian
    AERIE_CHECK(header_len <= kMaxHeaderBytes && header_len <= size_ - 8,
                where << ": header length " << header_len << " exceeds the file (" << size_ << " bytes)");
    const size_t data_start = 8 + static_cast<size_t>(header_len);
    const size_t data_size = size_ - data_start;
    json header;
    try {
      header = json::parse(reinterpret_cast<const char*>(bytes + 8), reinterpret_cast<const char*>(bytes + data_start));
    } catch (const json::exception& e) {
      AERIE_FAIL(where << ": header is not valid JSON (" << e.what() << ")");
    }
    AERIE_CHECK(header.is_object(), where << ": header must be a JSON object");
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      const std::string& name = it.key();
      const json& e = it.value();
      const std::string ctx = where + ": tensor '" + name + "'";
      AERIE_CHECK(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"),
                  ctx << " needs dtype, shape and data_offsets");
      AERIE_CHECK(e["dtype"].is_string(), ctx << ": dtype must be a string");
      TensorInfo info;
      info.name = name;
      info.dtype_name = e["dtype"].get<std::string>();
      const DTypeSpec* spec = find_dtype(info.dtype_name);
      AERIE_CHECK(spec, ctx << ": unknown dtype '" << info.dtype_name << "'");
      info.dtype = spec->dtype;
      AERIE_CHECK(e["shape"].is_array(), ctx << ": shape must be a list");
      uint64_t numel = 1;
      for (const auto& d : e["shape"]) {
        AERIE_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
                    ctx << ": shape entries must be non-negative integers");
        const uint64_t v = d.get<uint64_t>();
        AERIE_CHECK(v == 0 || numel <= std::numeric_limits<uint64_t>::max() / v / 8, ctx << ": shape overflows");
        numel *= v;
        info.shape.push_back(static_cast<int64_t>(v));
      }
      const json& off = e["data_offsets"];
      AERIE_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
                  ctx << ": data_offsets must be two non-negative integers");
      const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
      AERIE_CHECK(begin <= end && end <= data_size, ctx << ": data offsets [" << begin << ", " << end
                                                        << ") are outside the data section (" << data_size << " bytes)");
      AERIE_CHECK(end - begin == numel * spec->size, ctx << ": " << end - begin << " bytes do not match shape and dtype ("
                                                         << numel * spec->size << " expected)");
      info.data = bytes + data_start + begin;
      info.nbytes = static_cast<size_t>(end - begin);
      tensors_.emplace(name, std::move(info));
    }
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : tensors_) out.push_back(n);
  return out;
}

CheckpointReader::CheckpointReader(const std::filesystem::path& dir) {
  const auto index = dir / "model.safetensors.index.json";
  const auto single = dir / "model.safetensors";
  std::vector<std::filesystem::path> shards;
  if (std::filesystem::exists(index)) {
    std::ifstream in(index);
    std::stringstream ss;
    ss << in.rdbuf();
    json j;
    try {
      j = json::parse(ss.str());
    } catch (const json::exception& e) {
      AERIE_FAIL(index.string() << ": not valid JSON (" << e.what() << ")");
    }
    AERIE_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
                index.string() << ": needs a 'weight_map' object");
    std::set<std::string> files;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      AERIE_CHECK(it.value().is_string(), index.string() << ": weight_map entry '" << it.key() << "' must name a file");
      const std::string f = it.value().get<std::string>();
      AERIE_CHECK(f.find('/') == std::string::npos && f.find("..") == std::string::npos,
                  index.string() << ": shard name '" << f << "' must be a plain file name");
      files.insert(f);
    }
    for (const auto& f : files) {
      AERIE_CHECK(std::filesystem::exists(dir / f), index.string() << ": lists shard '" << f << "', which is missing");
      shards.push_back(dir / f);
    }
  } else if (std::filesystem::exists(single)) {
    shards.push_back(single);
  } else {
    AERIE_FAIL(dir.string() << ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& s : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>(s));
    for (const auto& n : files_.back()->names()) where_[n] = files_.back().get();
  }
}

bool CheckpointReader::has(const std::string& name) const { return where_.count(name) != 0; }

std::string CheckpointReader::file_of(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? std::string("checkpoint") : it->second->path().string();
}

const TensorInfo& CheckpointReader::info(const std::string& name) const {
  auto it = where_.find(name);
  AERIE_CHECK(it != where_.end(), "checkpoint has no tensor '" << name << "'");
  return *it->second->find(name);
}

TensorView CheckpointReader::get(const std::string& name, std::initializer_list<int64_t> expected) const {
  const TensorInfo& t = info(name);
  const std::string ctx = file_of(name) + ": tensor '" + name + "'";
  AERIE_CHECK(t.dtype.has_value(), ctx << " has dtype " << t.dtype_name << ", which Aerie cannot read");
  std::vector<int64_t> want(expected);
  auto shape_str = [](const std::vector<int64_t>& s) {
    std::string o = "[";
    for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
    return o + "]";
  };
  AERIE_CHECK(t.shape == want, ctx << " has shape " << shape_str(t.shape) << ", expected " << shape_str(want));
  TensorView v;
  v.data = const_cast<void*>(t.data);
  v.dtype = *t.dtype;
  v.device = Device::kCpu;
  v.ndim = static_cast<int>(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i) v.shape[i] = t.shape[i];
  return v;
}

}  // namespace aerie::model
