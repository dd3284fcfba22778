// The backends' private seam (cache/remote/backend.h is the public one): the
// factories the scheme table calls, and how a backend's failure travels from
// deep in a transfer to its get()/put().
//
// A transfer fails in many places (a poll, a reply, a deadline) several calls
// deep; each raises a RemoteFault (never an Error: an Error ends the command)
// and the backend's public method turns it into the RemoteFailure it returns
// (guarded()). Nothing outside the backends sees a RemoteFault.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "tvmffi_jit/cache/remote/options.h"
#include "tvmffi_jit/cache/remote/backend.h"

namespace tvmffi_jit::cache {

struct RemoteFault {
  RemoteFailureKind kind;
  std::string message;
};

[[noreturn]] inline void remote_fault(std::string message) {
  throw RemoteFault{RemoteFailureKind::kError, std::move(message)};
}
[[noreturn]] inline void remote_timeout(std::string message) {
  throw RemoteFault{RemoteFailureKind::kTimeout, std::move(message)};
}
// A value larger than the get() may take: refused before it is buffered (or
// cut off at the limit), and the backend stays usable. What the server holds
// under that name, not a failing server: kCorrupt, and the caller names the
// limit that applied.
[[noreturn]] inline void remote_too_large(std::string message) {
  throw RemoteFault{RemoteFailureKind::kCorrupt, std::move(message)};
}

// Runs `body` (a backend's get, put or connect) and returns its value, or the
// RemoteFault it raised as a failure.
template <typename Body>
auto guarded(Body&& body) -> Expected<std::invoke_result_t<Body>, RemoteFailure> {
  using T = std::invoke_result_t<Body>;
  try {
    if constexpr (std::is_void_v<T>) {
      body();
      return {};
    } else {
      return body();
    }
  } catch (RemoteFault& f) {
    return Unexpected<RemoteFailure>{RemoteFailure{f.kind, std::move(f.message)}};
  }
}

// The URL syntaxes a scheme's row can name (url.cpp):
//   [[user]:password@]host[:port][/path]: http(s) and any host-based server
void parse_host_url(RemoteUrl& u);
//   the same with port 6379 unless given and /db a database number
void parse_redis_url(RemoteUrl& u);
//   s3://BUCKET[/PREFIX]
void parse_s3_url(RemoteUrl& u);

}  // namespace tvmffi_jit::cache
