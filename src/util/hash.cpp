#include "tvmffi_jit/util/hash.h"

// OpenSSL's low-level SHA-256 (deprecated in 3.0, still shipped and using
// the same SHA-NI/AVX code): EVP would fetch the algorithm from a provider,
// and building the provider's method store costs ~0.5 ms on the first use of
// every process, a tenth of a cache hit's budget.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::util {

struct Sha256::Impl {
  SHA256_CTX ctx;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  if (SHA256_Init(&impl_->ctx) != 1) throw Error(ExitCode::kIo, "OpenSSL could not initialise SHA-256");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t size) {
  if (size) SHA256_Update(&impl_->ctx, data, size);
}

std::array<uint8_t, 32> Sha256::digest() {
  std::array<uint8_t, 32> out{};
  SHA256_Final(out.data(), &impl_->ctx);
  return out;
}

std::string Sha256::hex_digest() {
  auto d = digest();
  return hex_encode(d.data(), d.size());
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

std::string sha256_file_hex(const std::string& path) {
  MappedFile f(path);
  Sha256 h;
  h.update(f.data(), f.size());
  return h.hex_digest();
}

void KeyHasher::feed(std::string_view tag, std::string_view value) {
  std::string len = std::to_string(value.size());
  sha_.update(tag);
  sha_.update("\0", 1);
  sha_.update(len);
  sha_.update("\0", 1);
  sha_.update(value);
  sha_.update("\0", 1);
  if (keep_trace_) {
    trace_ += tag;
    trace_ += " [";
    trace_ += len;
    trace_ += "] ";
    if (value.size() <= 200) trace_ += value;
    else trace_ += std::string(value.substr(0, 80)) + "... (sha256 " + sha256_hex(value) + ")";
    trace_ += '\n';
  }
}

void KeyHasher::field(std::string_view tag, std::string_view value) { feed(tag, value); }

void KeyHasher::list(std::string_view tag, const std::vector<std::string>& values) {
  feed(tag, std::to_string(values.size()));
  std::string item_tag = std::string(tag) + "[]";
  for (const auto& v : values) feed(item_tag, v);
}

std::string KeyHasher::hex_digest() { return sha_.hex_digest(); }

}  // namespace tvmffi_jit::util
