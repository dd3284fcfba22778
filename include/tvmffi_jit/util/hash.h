// SHA-256 (OpenSSL) and a delimiter-tagged key hasher.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tvmffi_jit::util {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  std::array<uint8_t, 32> digest();  // finishes the hash; call once
  std::string hex_digest();          // finishes the hash; call once

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(std::string_view data);
// Streams the file (mmap); throws Error(kIo) naming the file if it cannot be read.
std::string sha256_file_hex(const std::string& path);

// Hashes a sequence of named fields so that no two different field sequences
// produce the same byte stream: every field is fed as
//   tag '\0' decimal-length '\0' value '\0'
// Lists are a count followed by their items. `trace()` keeps a readable copy
// of everything hashed (for `--debug-key` style diagnostics and tests).
class KeyHasher {
 public:
  explicit KeyHasher(bool keep_trace = false) : keep_trace_(keep_trace) {}
  void field(std::string_view tag, std::string_view value);
  void list(std::string_view tag, const std::vector<std::string>& values);
  std::string hex_digest();  // 64 hex chars; call once
  const std::string& trace() const { return trace_; }

 private:
  void feed(std::string_view tag, std::string_view value);
  Sha256 sha_;
  bool keep_trace_;
  std::string trace_;
};

}  // namespace tvmffi_jit::util
