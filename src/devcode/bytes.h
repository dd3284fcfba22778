// Bounds-checked little-endian views over untrusted bytes (bloaty style).
// Every access checks offset and length against the view with arithmetic
// that cannot wrap; a failed check throws FormatError naming what was read.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tvmffi_jit::devcode {

// "This input is malformed": caught by the inspector and turned into the
// report's error string. Not a tvmffi_jit::Error: it never reaches the CLI.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw FormatError(fmt::format(f, std::forward<Args>(args)...));
}

class Bytes {
 public:
  Bytes() = default;
  Bytes(const uint8_t* data, uint64_t size, uint64_t base = 0) : data_(data), size_(size), base_(base) {}

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Offset of byte 0 in the file the view was cut from (for messages).
  uint64_t base() const { return base_; }
  bool contains(uint64_t offset, uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }

  Bytes sub(uint64_t offset, uint64_t length, const char* what) const {
    if (!contains(offset, length))
      fail("{} at 0x{:x} size 0x{:x} runs past the end of its data at 0x{:x}", what, base_ + offset,
           length, base_ + size_);
    return Bytes(data_ + offset, length, base_ + offset);
  }
  Bytes from(uint64_t offset, const char* what) const {
    if (offset > size_) fail("{} offset 0x{:x} is past the end at 0x{:x}", what, base_ + offset, base_ + size_);
    return Bytes(data_ + offset, size_ - offset, base_ + offset);
  }

  template <typename T>
  T read(uint64_t offset, const char* what) const {
    if (!contains(offset, sizeof(T)))
      fail("{} at 0x{:x} is past the end of its data at 0x{:x}", what, base_ + offset, base_ + size_);
    T v;
    std::memcpy(&v, data_ + offset, sizeof(T));  // host is little endian (x86-64/aarch64)
    return v;
  }
  uint8_t u8(uint64_t o, const char* what) const { return read<uint8_t>(o, what); }
  uint16_t u16(uint64_t o, const char* what) const { return read<uint16_t>(o, what); }
  uint32_t u32(uint64_t o, const char* what) const { return read<uint32_t>(o, what); }
  uint64_t u64(uint64_t o, const char* what) const { return read<uint64_t>(o, what); }

  // NUL-terminated string starting at `offset`; the NUL must be inside the view.
  std::string_view cstr(uint64_t offset, const char* what) const {
    if (offset >= size_) fail("{} string offset 0x{:x} is outside its table (size 0x{:x})", what, offset, size_);
    const void* nul = std::memchr(data_ + offset, 0, size_ - offset);
    if (!nul) fail("{} string at 0x{:x} is not NUL-terminated", what, base_ + offset);
    return std::string_view(reinterpret_cast<const char*>(data_ + offset),
                            static_cast<const uint8_t*>(nul) - (data_ + offset));
  }
  std::string_view text() const { return std::string_view(reinterpret_cast<const char*>(data_), size_); }

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t base_ = 0;
};

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + (a - 1)) & ~(a - 1); }

}  // namespace tvmffi_jit::devcode
