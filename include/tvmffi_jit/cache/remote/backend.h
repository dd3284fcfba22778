// One remote server behind a small interface: get a blob by name, put one,
// say its name. The facade (cache/storage.h) asks the backends in order,
// verifies what they return and counts their failures by kind.
//
// Backends: HTTP(S) GET/PUT (nginx WebDAV, bazel-remote /ac/) and S3
// (SigV4-signed GET/PUT, the same transfer code) through libcurl, opened with
// dlopen() only when an http(s) or s3 remote is used; Redis GETRANGE/SET
// through hiredis (linked statically). Which one a URL gets is the scheme
// table's answer (make_remote_backend). The unit tests' in-memory server is
// theirs (tests/unit/memory_backend.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tvmffi_jit/cache/remote/url.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::cache {

struct RemoteOptions;  // cache/remote/options.h

// Why a remote entry was not used. A server's own failures are kError and
// kTimeout (then it is given up for the rest of the process); what it sent is
// kCorrupt (verification failed, or a get() found a value larger than it may
// take), kUntrusted (no trusted key signed it) or kStale (built against
// headers that differ here): a miss for that key or result, the server is
// asked again. Absence is not a failure.
enum class RemoteFailureKind { kError, kTimeout, kCorrupt, kUntrusted, kStale };
using RemoteFailure = Failure<RemoteFailureKind>;

// A blob, or nullopt when the server has none by that name.
using RemoteGet = Expected<std::optional<std::string>, RemoteFailure>;
using RemotePut = Expected<void, RemoteFailure>;

// One server. Only what ends the command is thrown (an Error): a termination
// signal (exit 128 + signal) and a missing client library (exit 4).
class RemoteBackend {
 public:
  virtual ~RemoteBackend() = default;
  // At most `max_bytes` (the caller's limit: a result list's cap, the blob
  // limit, what is left of a lookup's budget): a larger value is a kCorrupt
  // failure, refused before it is buffered, whose message names no variable.
  virtual RemoteGet get(const std::string& object, uint64_t max_bytes) = 0;
  virtual RemotePut put(const std::string& object, const std::string& blob) = 0;
  // How messages name it: the redacted URL.
  virtual std::string name() const = 0;
};

using RemoteOpen = Expected<std::unique_ptr<RemoteBackend>, RemoteFailure>;

// A row of the scheme table (kSchemes, cache/remote/backend.cpp): everything
// a scheme is. Adding a backend is its file, its row, its CMake line and its
// section of docs/remote.md; URL parsing, object names, messages and the
// --remote help read the table.
struct RemoteScheme {
  const char* name;  // "redis": URLs start "redis://"
  // Fills and checks the parsed URL (host, port, credentials, bucket...);
  // throws usage_error naming u.shown. cache/remote/backends.h has the
  // syntaxes there are (host[:port] URLs, Redis, S3).
  void (*parse)(RemoteUrl& u);
  char separator;  // between the namespace and the key in object names
  // The backend for a parsed URL, connected where the protocol has a
  // connection. Raises RemoteFault (cache/remote/backends.h) for a server
  // that fails; throws Error only for what ends the command.
  std::unique_ptr<RemoteBackend> (*make)(const RemoteUrl& url, const RemoteOptions& options);
};

// The row named `name` ("redis"), or null.
const RemoteScheme* find_remote_scheme(const std::string& name);
// "http://, https://, redis:// or s3://": what messages and --remote's help list.
std::string remote_scheme_list();

// The backend for `url` (its scheme's make), connected where the protocol has
// a connection (Redis). A server that cannot be reached is a failure.
RemoteOpen make_remote_backend(const RemoteUrl& url, const RemoteOptions& options);

// The read-only wrapper (--remote-read-only): gets pass through, a put fails
// (kError) without reaching the server. The facade does not even pack an
// upload when the remotes are read-only.
std::unique_ptr<RemoteBackend> read_only(std::unique_ptr<RemoteBackend> backend);

}  // namespace tvmffi_jit::cache
