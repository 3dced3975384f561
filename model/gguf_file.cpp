#include "model/gguf_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "kernels/dtype.hpp"
#include "kernels/error.hpp"
#include "kernels/weight_blocks.hpp"

namespace aerie::model {

namespace {

using nlohmann::json;

constexpr uint32_t kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 4;     // real files nest none; a hostile one must not recurse deeply
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;

// Reads little-endian values from the mapping; every read is checked against the end.
class Cursor {
 public:
  Cursor(const unsigned char* base, size_t size, const std::string& where) : base_(base), size_(size), where_(where) {}
  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    AERIE_CHECK(n <= kMaxStringBytes && n <= left(), where_ << ": " << what << " claims " << n << " bytes, but only " << left() << " are left in the file");
    std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

 private:
  void need(size_t n, const char* what) const {
    AERIE_CHECK(n <= left(), where_ << ": truncated while reading " << what << " (offset " << pos_ << ", file size " << size_ << ")");
  }
  const unsigned char* base_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& where_;
};

enum ValueType : uint32_t { kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

// The smallest encoding of one element, to bound array counts by the bytes left.
size_t min_value_bytes(uint32_t t) {
  switch (t) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kString: case kU64: case kI64: case kF64: return 8;
    case kArray: return 12;
    default: return 1;
  }
}

json read_value(Cursor& c, uint32_t type, const std::string& key, const std::string& where, int depth) {
  switch (type) {
    case kU8: return c.read<uint8_t>("a u8 value");
    case kI8: return c.read<int8_t>("an i8 value");
    case kU16: return c.read<uint16_t>("a u16 value");
    case kI16: return c.read<int16_t>("an i16 value");
    case kU32: return c.read<uint32_t>("a u32 value");
    case kI32: return c.read<int32_t>("an i32 value");
    case kF32: return c.read<float>("an f32 value");
    case kU64: return c.read<uint64_t>("a u64 value");
    case kI64: return c.read<int64_t>("an i64 value");
    case kF64: return c.read<double>("an f64 value");
    case kBool: {
      const uint8_t b = c.read<uint8_t>("a bool value");
      AERIE_CHECK(b <= 1, where << ": metadata '" << key << "' has bool byte " << int{b});
      return b == 1;
    }
    case kString: return c.read_string("a string value");
    case kArray: {
      AERIE_CHECK(depth < kMaxArrayNesting, where << ": metadata '" << key << "' nests arrays deeper than " << kMaxArrayNesting);
      const uint32_t et = c.read<uint32_t>("an array's element type");
      AERIE_CHECK(et <= kF64, where << ": metadata '" << key << "' is an array of unknown type " << et);
      const uint64_t n = c.read<uint64_t>("an array's length");
      AERIE_CHECK(n <= c.left() / min_value_bytes(et),
                  where << ": metadata '" << key << "' claims " << n << " elements, more than the " << c.left() << " bytes left can hold");
      json arr = json::array();
      arr.get_ref<json::array_t&>().reserve(static_cast<size_t>(n));
      for (uint64_t i = 0; i < n; ++i) arr.push_back(read_value(c, et, key, where, depth + 1));
      return arr;
    }
    default: AERIE_FAIL(where << ": metadata '" << key << "' has unknown value type " << type);
  }
}

}  // namespace

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> GgufTensor::shape() const { return {dims.rbegin(), dims.rend()}; }

std::string gguf_type_name(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::kF32: return "F32";
    case GgufType::kF16: return "F16";
    case GgufType::kQ4_0: return "Q4_0";
    case GgufType::kQ4_1: return "Q4_1";
    case GgufType::kQ8_0: return "Q8_0";
    case GgufType::kBF16: return "BF16";
  }
  return "type " + std::to_string(type);
}

static bool known_type(uint32_t t) { return gguf_type_name(t).rfind("type ", 0) != 0; }

int64_t gguf_block_elements(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::kF32: case GgufType::kF16: case GgufType::kBF16: return 1;
    case GgufType::kQ4_0: case GgufType::kQ4_1: case GgufType::kQ8_0: return 32;
  }
  AERIE_FAIL("GGUF tensor type " << gguf_type_name(type) << " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)");
}

std::optional<kernels::BlockFormat> gguf_block_format(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::kQ4_0: return kernels::BlockFormat::kQ4_0;
    case GgufType::kQ4_1: return kernels::BlockFormat::kQ4_1;
    case GgufType::kQ8_0: return kernels::BlockFormat::kQ8_0;
    default: return std::nullopt;
  }
}

int64_t gguf_block_bytes(uint32_t type) {
  if (const auto f = gguf_block_format(type)) return kernels::block_bytes(*f);
  switch (static_cast<GgufType>(type)) {
    case GgufType::kF32: return 4;
    case GgufType::kF16: case GgufType::kBF16: return 2;
    default: return gguf_block_elements(type);  // throws
  }
}

void gguf_dequantize(uint32_t type, const unsigned char* src, int64_t n, float* out) {
  const int64_t be = gguf_block_elements(type), bb = gguf_block_bytes(type);
  AERIE_CHECK(n % be == 0, "GGUF " << gguf_type_name(type) << ": " << n << " elements is not a whole number of blocks of " << be);
  // The quantized blocks decode as the CPU's block products read them (kernels/weight_blocks.hpp).
  if (const auto f = gguf_block_format(type)) return kernels::dequantize_blocks(*f, src, n / be, out);
  auto f16 = [](const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_float(h);
  };
  for (int64_t b = 0; b < n / be; ++b) {
    const unsigned char* p = src + b * bb;
    float* o = out + b * be;
    switch (static_cast<GgufType>(type)) {
      case GgufType::kF32: std::memcpy(o, p, 4); break;
      case GgufType::kF16: o[0] = f16(p); break;
      case GgufType::kBF16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        o[0] = bf16_to_float(h);
        break;
      }
      default: break;  // the quantized types returned above
    }
  }
}

bool GgufFile::is_gguf(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufFile::GgufFile(const std::filesystem::path& path) : path_(path), meta_(std::make_unique<json>(json::object())) {
  const std::string where = path.string();
  int fd = ::open(where.c_str(), O_RDONLY);
  AERIE_CHECK(fd >= 0, where << ": cannot open (" << std::strerror(errno) << ")");
  struct stat st{};
  if (::fstat(fd, &st) != 0 || st.st_size < 24) {
    ::close(fd);
    AERIE_FAIL(where << ": too short to be a GGUF file");
  }
  size_ = static_cast<size_t>(st.st_size);
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  AERIE_CHECK(map_ != MAP_FAILED, where << ": mmap failed (" << std::strerror(errno) << ")");
  try {
    const auto* base = static_cast<const unsigned char*>(map_);
    Cursor c(base, size_, where);
    AERIE_CHECK(std::memcmp(base, "GGUF", 4) == 0, where << ": not a GGUF file (no 'GGUF' magic)");
    c.read<uint32_t>("the magic");
    version_ = c.read<uint32_t>("the version");
    AERIE_CHECK(version_ == 2 || version_ == 3, where << ": GGUF version " << version_ << " is not supported (2 or 3)");
    const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
    const uint64_t n_kv = c.read<uint64_t>("the metadata count");
    AERIE_CHECK(n_kv <= c.left() / 12, where << ": metadata count " << n_kv << " exceeds what the file can hold");
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string key = c.read_string("a metadata key");
      const uint32_t type = c.read<uint32_t>("a metadata value type");
      AERIE_CHECK(!meta_->contains(key), where << ": metadata key '" << key << "' appears twice");
      (*meta_)[key] = read_value(c, type, key, where, 0);
    }
    uint64_t alignment = 32;
    if (meta_->contains("general.alignment")) {
      const json& a = (*meta_)["general.alignment"];
      AERIE_CHECK(a.is_number_unsigned() && a.get<uint64_t>() > 0 && (a.get<uint64_t>() & (a.get<uint64_t>() - 1)) == 0,
                  where << ": general.alignment must be a power of two");
      alignment = a.get<uint64_t>();
    }
    // name (>= 8) + n_dims (4) + one dim (8) + type (4) + offset (8)
    AERIE_CHECK(n_tensors <= c.left() / 32, where << ": tensor count " << n_tensors << " exceeds what the file can hold");
    struct Pending {
      uint64_t offset;
    };
    std::vector<Pending> offsets;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      GgufTensor t;
      t.name = c.read_string("a tensor name");
      const std::string ctx = where + ": tensor '" + t.name + "'";
      const uint32_t nd = c.read<uint32_t>("a tensor's dimension count");
      AERIE_CHECK(nd >= 1 && nd <= kMaxDims, ctx << " has " << nd << " dimensions (1 to " << kMaxDims << ")");
      uint64_t numel = 1;
      for (uint32_t d = 0; d < nd; ++d) {
        const uint64_t dim = c.read<uint64_t>("a tensor dimension");
        AERIE_CHECK(dim > 0 && dim <= (uint64_t{1} << 40) && numel <= (uint64_t{1} << 40) / dim, ctx << " has an impossible shape");
        numel *= dim;
        t.dims.push_back(static_cast<int64_t>(dim));
      }
      t.type = c.read<uint32_t>("a tensor type");
      const uint64_t offset = c.read<uint64_t>("a tensor offset");
      AERIE_CHECK(offset % alignment == 0, ctx << " offset " << offset << " is not a multiple of the alignment " << alignment);
      AERIE_CHECK(!by_name_.count(t.name), where << ": tensor '" << t.name << "' appears twice");
      if (known_type(t.type)) {
        const int64_t be = gguf_block_elements(t.type);
        AERIE_CHECK(t.dims[0] % be == 0, ctx << " (" << gguf_type_name(t.type) << ") has rows of " << t.dims[0] << " elements, not a multiple of its block " << be);
        t.nbytes = static_cast<size_t>(static_cast<int64_t>(numel) / be * gguf_block_bytes(t.type));
      }
      by_name_[t.name] = tensors_.size();
      tensors_.push_back(std::move(t));
      offsets.push_back({offset});
    }
    const size_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
    AERIE_CHECK(data_start <= size_, where << ": the tensor data section starts past the end of the file");
    for (size_t i = 0; i < tensors_.size(); ++i) {
      GgufTensor& t = tensors_[i];
      const uint64_t off = offsets[i].offset;
      AERIE_CHECK(off <= size_ - data_start && t.nbytes <= size_ - data_start - off,
                  where << ": tensor '" << t.name << "' (" << t.nbytes << " bytes at data offset " << off << ") runs past the end of the file ("
                        << size_ << " bytes): truncated?");
      t.data = base + data_start + off;
    }
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(map_, size_);
}

const json& GgufFile::metadata() const { return *meta_; }
bool GgufFile::has(const std::string& key) const { return meta_->contains(key); }

static const json& lookup(const json& meta, const std::string& key, const std::filesystem::path& path) {
  auto it = meta.find(key);
  AERIE_CHECK(it != meta.end(), path.string() << ": metadata has no '" << key << "'");
  return *it;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const json& v = lookup(*meta_, key, path_);
  AERIE_CHECK(v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max())),
              path_.string() << ": metadata '" << key << "' is not an integer");
  return v.get<int64_t>();
}

double GgufFile::get_float(const std::string& key) const {
  const json& v = lookup(*meta_, key, path_);
  AERIE_CHECK(v.is_number(), path_.string() << ": metadata '" << key << "' is not a number");
  return v.get<double>();
}

bool GgufFile::get_bool(const std::string& key) const {
  const json& v = lookup(*meta_, key, path_);
  AERIE_CHECK(v.is_boolean(), path_.string() << ": metadata '" << key << "' is not a bool");
  return v.get<bool>();
}

std::string GgufFile::get_string(const std::string& key) const {
  const json& v = lookup(*meta_, key, path_);
  AERIE_CHECK(v.is_string(), path_.string() << ": metadata '" << key << "' is not a string");
  return v.get<std::string>();
}

const json& GgufFile::get_array(const std::string& key) const {
  const json& v = lookup(*meta_, key, path_);
  AERIE_CHECK(v.is_array(), path_.string() << ": metadata '" << key << "' is not an array");
  return v;
}

const GgufTensor* GgufFile::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace aerie::model
