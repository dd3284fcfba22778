#include "tvmffi_jit/cache/remote/backend.h"

#include "cache/remote/backends.h"

namespace tvmffi_jit::cache {

namespace {

using Factory = std::unique_ptr<RemoteBackend> (*)(const RemoteUrl&, const RemoteOptions&);

struct SchemeBackend {
  RemoteScheme scheme;
  Factory make;
};
constexpr SchemeBackend kBackends[] = {
    {RemoteScheme::kHttp, make_http_backend},
    {RemoteScheme::kHttps, make_http_backend},
    {RemoteScheme::kRedis, make_redis_backend},
    {RemoteScheme::kS3, make_s3_backend},
};

class ReadOnlyBackend : public RemoteBackend {
 public:
  explicit ReadOnlyBackend(std::unique_ptr<RemoteBackend> inner) : inner_(std::move(inner)) {}
  RemoteGet get(const std::string& object, uint64_t max_bytes) override { return inner_->get(object, max_bytes); }
  RemotePut put(const std::string& object, const std::string&) override {
    return fail(RemoteFailureKind::kError, "PUT " + object + ": " + name() + " is read-only here (--remote-read-only)");
  }
  std::string name() const override { return inner_->name(); }

 private:
  std::unique_ptr<RemoteBackend> inner_;
};

class MemoryBackend : public RemoteBackend {
 public:
  MemoryBackend(std::shared_ptr<MemoryServer> server, std::string name)
      : server_(std::move(server)), name_(std::move(name)) {}
  RemoteGet get(const std::string& object, uint64_t max_bytes) override {
    std::lock_guard<std::mutex> lock(server_->mutex);
    ++server_->gets;
    if (server_->failing) return Unexpected<RemoteFailure>{*server_->failing};
    auto it = server_->objects.find(object);
    if (it == server_->objects.end()) return std::optional<std::string>();
    if (it->second.size() > max_bytes)
      return fail(RemoteFailureKind::kError, "GET " + object + ": the blob is larger than the limit (" +
                                                 std::to_string(max_bytes) + " bytes); not downloaded");
    return std::optional<std::string>(it->second);
  }
  RemotePut put(const std::string& object, const std::string& blob) override {
    std::lock_guard<std::mutex> lock(server_->mutex);
    ++server_->puts;
    if (server_->failing) return Unexpected<RemoteFailure>{*server_->failing};
    server_->objects[object] = blob;
    return {};
  }
  std::string name() const override { return name_; }

 private:
  std::shared_ptr<MemoryServer> server_;
  std::string name_;
};

}  // namespace

RemoteOpen make_remote_backend(const RemoteUrl& url, const RemoteOptions& options) {
  for (const auto& b : kBackends)
    if (b.scheme == url.scheme) return guarded([&] { return b.make(url, options); });
  return fail(RemoteFailureKind::kError, "no backend for " + url.shown);
}

std::unique_ptr<RemoteBackend> read_only(std::unique_ptr<RemoteBackend> backend) {
  return std::make_unique<ReadOnlyBackend>(std::move(backend));
}

std::unique_ptr<RemoteBackend> make_memory_backend(std::shared_ptr<MemoryServer> server, std::string name) {
  return std::make_unique<MemoryBackend>(std::move(server), std::move(name));
}

}  // namespace tvmffi_jit::cache
