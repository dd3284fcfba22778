#include "tvmffi_jit/cache/remote/backend.h"

#include "cache/remote/backends.h"
#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::cache {

namespace {

std::string_view scheme_text(std::string_view url) {
  size_t p = url.find("://");
  return p == std::string_view::npos ? std::string_view() : url.substr(0, p);
}

}  // namespace

// The backends' factories, each defined in its own file.
std::unique_ptr<RemoteBackend> make_http_backend(const RemoteUrl& url, const RemoteOptions& options);  // http.cpp
std::unique_ptr<RemoteBackend> make_redis_backend(const RemoteUrl& url, const RemoteOptions& options);  // redis.cpp
std::unique_ptr<RemoteBackend> make_s3_backend(const RemoteUrl& url, const RemoteOptions& options);  // s3.cpp

namespace {

// The scheme table: the one place a scheme is registered (cache/remote/backend.h).
constexpr RemoteScheme kSchemes[] = {
    // http(s): the URL itself (less a trailing '/') is the base of every object.
    {"http", parse_host_url, '/', make_http_backend},
    {"https", parse_host_url, '/', make_http_backend},
    {"redis", parse_redis_url, ':', make_redis_backend},
    {"s3", parse_s3_url, '/', make_s3_backend},
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

}  // namespace

const RemoteScheme* find_remote_scheme(const std::string& name) {
  for (const auto& s : kSchemes)
    if (name == s.name) return &s;
  return nullptr;
}

std::string remote_scheme_list() {
  std::string list;
  const size_t n = sizeof kSchemes / sizeof kSchemes[0];
  for (size_t i = 0; i < n; ++i)
    list += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + kSchemes[i].name + "://";
  return list;
}

// A URL's row of the scheme table, then its syntax (url.cpp): here, beside
// the table, so that the syntax parsers the rows point at never call back.
RemoteUrl parse_remote_url(const std::string& url) {
  RemoteUrl u;
  u.text = url;
  u.shown = redact_url(url);
  u.scheme = find_remote_scheme(std::string(scheme_text(url)));
  if (!u.scheme)
    throw usage_error("remote " + u.shown + ": the URL must start with " + remote_scheme_list() + " (docs/remote.md)");
  u.scheme->parse(u);
  return u;
}

std::vector<RemoteUrl> parse_remote_urls(const std::vector<std::string>& urls) {
  std::vector<RemoteUrl> out;
  for (const auto& url : urls) out.push_back(parse_remote_url(url));
  return out;
}

bool is_s3_url(const std::string& url) { return scheme_text(url) == "s3"; }

RemoteOpen make_remote_backend(const RemoteUrl& url, const RemoteOptions& options) {
  if (!url.scheme) return fail(RemoteFailureKind::kError, "no backend for " + url.shown);
  return guarded([&] { return url.scheme->make(url, options); });
}

std::unique_ptr<RemoteBackend> read_only(std::unique_ptr<RemoteBackend> backend) {
  return std::make_unique<ReadOnlyBackend>(std::move(backend));
}

}  // namespace tvmffi_jit::cache
