// An in-memory remote server for unit tests (cache/remote/backend.h's
// RemoteBackend): named objects, counted requests, and a failure every
// request gets while `failing` is set (a server that is down or that times
// out). Shared, so a test keeps looking at it after the backend reading it was
// given up and destroyed. Test-only: no scheme of the table reaches it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::testing {

struct MemoryServer {
  std::mutex mutex;
  std::map<std::string, std::string> objects;
  size_t gets = 0;
  size_t puts = 0;
  std::optional<cache::RemoteFailure> failing;
};

class MemoryBackend : public cache::RemoteBackend {
 public:
  MemoryBackend(std::shared_ptr<MemoryServer> server, std::string name)
      : server_(std::move(server)), name_(std::move(name)) {}
  cache::RemoteGet get(const std::string& object, uint64_t max_bytes) override {
    std::lock_guard<std::mutex> lock(server_->mutex);
    ++server_->gets;
    if (server_->failing) return Unexpected<cache::RemoteFailure>{*server_->failing};
    auto it = server_->objects.find(object);
    if (it == server_->objects.end()) return std::optional<std::string>();
    if (it->second.size() > max_bytes)
      return fail(cache::RemoteFailureKind::kCorrupt, "GET " + object + ": the blob is larger than the limit (" +
                                                          std::to_string(max_bytes) + " bytes); not downloaded");
    return std::optional<std::string>(it->second);
  }
  cache::RemotePut put(const std::string& object, const std::string& blob) override {
    std::lock_guard<std::mutex> lock(server_->mutex);
    ++server_->puts;
    if (server_->failing) return Unexpected<cache::RemoteFailure>{*server_->failing};
    server_->objects[object] = blob;
    return {};
  }
  std::string name() const override { return name_; }

 private:
  std::shared_ptr<MemoryServer> server_;
  std::string name_;
};

inline std::unique_ptr<cache::RemoteBackend> make_memory_backend(std::shared_ptr<MemoryServer> server,
                                                                 std::string name) {
  return std::make_unique<MemoryBackend>(std::move(server), std::move(name));
}

}  // namespace tvmffi_jit::testing
