// Between the storage facade (cache/storage.cpp: the tiers' order, the local
// and imported tiers) and the remote tier (cache/storage_remote.cpp): the
// servers, and the answer of a shared tier. Private to the cache layer.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/cache/storage.h"

namespace tvmffi_jit::cache {

// One remote server of the command.
struct Storage::Server {
  // Held while the server is opened, asked or given up: a backend is one
  // connection, and the first module to find the server silent gives it up
  // before the next one asks.
  std::mutex mutex;
  std::optional<RemoteUrl> url;  // empty: `backend` was given
  // How it names objects: given backends (in-memory ones) as paths.
  const RemoteScheme* scheme = nullptr;
  std::string shown;  // redacted
  std::unique_ptr<RemoteBackend> backend;
  bool down = false;
};

// A shared tier's answer: the entry it was published as locally.
inline Found shared_tier_hit(LookupResult entry, std::string source) {
  Found f;
  f.status = CacheStatus::kRemoteHit;
  f.entry = std::move(entry);
  f.source = std::move(source);
  return f;
}

}  // namespace tvmffi_jit::cache
