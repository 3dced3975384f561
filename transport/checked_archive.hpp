#pragma once
// Cereal archives for frame payloads. The output archive appends raw little-endian bytes to
// a vector; the input archive reads from a span and checks every length before anything is
// allocated: a size tag larger than the bytes left in the payload is an error, so a
// malicious or truncated frame can never make a vector allocate more than the frame holds.
#include <cereal/cereal.hpp>
#include <cereal/types/vector.hpp>
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

namespace aerie::transport {

class PayloadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CheckedOutputArchive : public cereal::OutputArchive<CheckedOutputArchive, cereal::AllowEmptyClassElision> {
 public:
  explicit CheckedOutputArchive(std::vector<uint8_t>& out)
      : cereal::OutputArchive<CheckedOutputArchive, cereal::AllowEmptyClassElision>(this), out_(out) {}
  void saveBinary(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + size);
  }

 private:
  std::vector<uint8_t>& out_;
};

class CheckedInputArchive : public cereal::InputArchive<CheckedInputArchive, cereal::AllowEmptyClassElision> {
 public:
  explicit CheckedInputArchive(std::span<const uint8_t> in)
      : cereal::InputArchive<CheckedInputArchive, cereal::AllowEmptyClassElision>(this), in_(in) {}
  void loadBinary(void* data, size_t size) {
    if (size == 0) return;  // an empty vector's data() may be null: memcpy must not see it
    if (size > remaining()) throw PayloadError("payload truncated: " + std::to_string(size) + " bytes wanted, " +
                                               std::to_string(remaining()) + " left");
    std::memcpy(data, in_.data() + at_, size);
    at_ += size;
  }
  size_t remaining() const { return in_.size() - at_; }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

template <class T>
inline std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_SAVE_FUNCTION_NAME(CheckedOutputArchive& ar, const T& t) {
  ar.saveBinary(std::addressof(t), sizeof(t));
}
template <class T>
inline std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_LOAD_FUNCTION_NAME(CheckedInputArchive& ar, T& t) {
  ar.loadBinary(std::addressof(t), sizeof(t));
}
template <class Archive, class T>
inline CEREAL_ARCHIVE_RESTRICT(CheckedInputArchive, CheckedOutputArchive) CEREAL_SERIALIZE_FUNCTION_NAME(Archive& ar, cereal::NameValuePair<T>& t) {
  ar(t.value);
}
template <class T>
inline void CEREAL_SAVE_FUNCTION_NAME(CheckedOutputArchive& ar, const cereal::SizeTag<T>& t) {
  const uint64_t n = static_cast<uint64_t>(t.size);
  ar.saveBinary(&n, sizeof n);
}
// Every element of every container Aerie sends takes at least one byte, so a count above
// the bytes left cannot be honest.
template <class T>
inline void CEREAL_LOAD_FUNCTION_NAME(CheckedInputArchive& ar, cereal::SizeTag<T>& t) {
  uint64_t n = 0;
  ar.loadBinary(&n, sizeof n);
  if (n > ar.remaining()) throw PayloadError("length " + std::to_string(n) + " exceeds the " + std::to_string(ar.remaining()) +
                                             " bytes left in the payload");
  t.size = static_cast<std::remove_reference_t<T>>(n);
}
template <class T>
inline void CEREAL_SAVE_FUNCTION_NAME(CheckedOutputArchive& ar, const cereal::BinaryData<T>& bd) {
  ar.saveBinary(bd.data, static_cast<size_t>(bd.size));
}
template <class T>
inline void CEREAL_LOAD_FUNCTION_NAME(CheckedInputArchive& ar, cereal::BinaryData<T>& bd) {
  ar.loadBinary(bd.data, static_cast<size_t>(bd.size));
}

// The fewest payload bytes one element of a vector can take: a count of N elements needs at
// least N times this many bytes left, or the frame is refused before anything is allocated
// (a count checked only against the bytes left let a 64 MiB frame allocate gigabytes of
// 56-byte structs). Message structs specialize it (transport/messages.hpp).
template <class T>
inline constexpr size_t kMinWireBytes = std::is_arithmetic_v<T> ? sizeof(T) : 1;
template <class T, class A>
inline constexpr size_t kMinWireBytes<std::vector<T, A>> = 8;  // its count
template <>
inline constexpr size_t kMinWireBytes<std::string> = 8;

// Vectors on the checked archive: the count is checked against the element size, arithmetic
// elements are read in one copy, others one at a time (memory grows with what was read).
template <class T, class A>
inline void CEREAL_LOAD_FUNCTION_NAME(CheckedInputArchive& ar, std::vector<T, A>& v) {
  cereal::size_type n = 0;
  ar(cereal::make_size_tag(n));
  if (n > ar.remaining() / kMinWireBytes<T>)
    throw PayloadError("length " + std::to_string(n) + " of " + std::to_string(kMinWireBytes<T>) + "-byte elements exceeds the " +
                       std::to_string(ar.remaining()) + " bytes left in the payload");
  v.clear();
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    v.resize(static_cast<size_t>(n));
    ar.loadBinary(v.data(), static_cast<size_t>(n) * sizeof(T));
  } else {
    v.reserve(static_cast<size_t>(std::min<cereal::size_type>(n, 4096)));
    for (cereal::size_type i = 0; i < n; ++i) {
      T x{};
      ar(x);
      v.push_back(std::move(x));
    }
  }
}

}  // namespace aerie::transport

CEREAL_REGISTER_ARCHIVE(aerie::transport::CheckedOutputArchive)
CEREAL_REGISTER_ARCHIVE(aerie::transport::CheckedInputArchive)
CEREAL_SETUP_ARCHIVE_TRAITS(aerie::transport::CheckedInputArchive, aerie::transport::CheckedOutputArchive)
