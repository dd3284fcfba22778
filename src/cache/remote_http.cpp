// HTTP(S) backend: GET/PUT of whole blobs through libcurl.
//
// libcurl is opened with dlopen() the first time an http(s) remote is used:
// the shipped binary links its libraries statically and needs only glibc,
// and Debian's libcurl cannot be linked statically (its static archive needs
// static builds of a dozen libraries Debian does not ship: GSSAPI, LDAP,
// nghttp2, libssh2, libpsl...). libcurl.so.4 has kept its ABI since 2006,
// and every distribution has it. <curl/curl.h> (libcurl4-openssl-dev) gives
// the types and constants only; nothing links against it.
#include <dlfcn.h>

#include <curl/curl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "tvmffi_jit/cache/remote.h"
#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::cache {

namespace {

struct CurlApi {
  CURLcode (*global_init)(long);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// `configured`: RemoteOptions::libcurl ($TVMFFI_JIT_LIBCURL, read by the
// CLI). Loaded once per process: the first backend's choice stands.
const CurlApi& curl_api(const std::string& configured) {
  static CurlApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [&configured] {
    std::string lib = configured.empty() ? "libcurl.so.4" : configured;
    void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      error = "an http(s) remote cache needs libcurl, and " + lib + " could not be loaded (" + (e ? e : "?") +
              "): install libcurl4 (Debian/Ubuntu) or libcurl (Fedora/RHEL), point TVMFFI_JIT_LIBCURL at it, "
              "or remove the http remote (--remote / TVMFFI_JIT_REMOTE)";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (!fn && error.empty()) error = lib + " has no " + name + ": it is not a usable libcurl";
    };
    sym(api.global_init, "curl_global_init");
    sym(api.easy_init, "curl_easy_init");
    sym(api.easy_setopt, "curl_easy_setopt");
    sym(api.easy_perform, "curl_easy_perform");
    sym(api.easy_getinfo, "curl_easy_getinfo");
    sym(api.easy_cleanup, "curl_easy_cleanup");
    sym(api.easy_strerror, "curl_easy_strerror");
    sym(api.slist_append, "curl_slist_append");
    sym(api.slist_free_all, "curl_slist_free_all");
    if (error.empty() && api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) error = "curl_global_init failed";
  });
  if (!error.empty()) throw missing_tool_error(error);
  return api;
}

struct Download {
  std::string body;
  uint64_t max = 0;
  bool too_large = false;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* d = static_cast<Download*>(user);
  size_t n = size * count;
  if (d->body.size() + n > d->max) {
    d->too_large = true;
    return 0;  // aborts the transfer
  }
  d->body.append(data, n);
  return n;
}

size_t on_discard(char*, size_t size, size_t count, void*) { return size * count; }

struct Upload {
  const std::string* blob;
  size_t pos = 0;
};

size_t on_read(char* buf, size_t size, size_t count, void* user) {
  auto* u = static_cast<Upload*>(user);
  size_t n = std::min(size * count, u->blob->size() - u->pos);
  std::memcpy(buf, u->blob->data() + u->pos, n);
  u->pos += n;
  return n;
}

class HttpBackend : public RemoteBackend {
 public:
  HttpBackend(std::string url, const RemoteOptions& o) : api_(curl_api(o.libcurl)), options_(o) {
    while (!url.empty() && url.back() == '/') url.pop_back();
    base_ = url;
    shown_ = redact_url(url);
    curl_ = api_.easy_init();
    if (!curl_) throw io_error("curl_easy_init failed");
    // "Expect: 100-continue" would stall every upload above 1 MiB for a second
    // on servers that do not answer it.
    headers_ = api_.slist_append(nullptr, "Expect:");
  }
  ~HttpBackend() override {
    api_.slist_free_all(headers_);
    api_.easy_cleanup(curl_);
  }

  std::optional<std::string> get(const std::string& object, uint64_t max_bytes) override {
    Download d;
    d.max = max_bytes;
    setup(object);
    api_.easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
    api_.easy_setopt(curl_, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_bytes));
    api_.easy_setopt(curl_, CURLOPT_WRITEFUNCTION, on_body);
    api_.easy_setopt(curl_, CURLOPT_WRITEDATA, &d);
    long status = perform("GET", object, &d);
    if (status == 404) return std::nullopt;
    if (status != 200) throw io_error("GET " + object + " answered HTTP " + std::to_string(status));
    return std::move(d.body);
  }

  void put(const std::string& object, const std::string& blob) override {
    Upload u{&blob, 0};
    setup(object);
    api_.easy_setopt(curl_, CURLOPT_UPLOAD, 1L);
    api_.easy_setopt(curl_, CURLOPT_READFUNCTION, on_read);
    api_.easy_setopt(curl_, CURLOPT_READDATA, &u);
    api_.easy_setopt(curl_, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(blob.size()));
    api_.easy_setopt(curl_, CURLOPT_WRITEFUNCTION, on_discard);
    long status = perform("PUT", object, nullptr);
    if (status != 200 && status != 201 && status != 204)
      throw io_error("PUT " + object + " answered HTTP " + std::to_string(status));
  }

 private:
  void setup(const std::string& object) {
    api_.easy_setopt(curl_, CURLOPT_UPLOAD, 0L);
    api_.easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
    url_ = base_ + "/" + object;
    api_.easy_setopt(curl_, CURLOPT_URL, url_.c_str());
    api_.easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    api_.easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
    api_.easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.transfer_timeout_ms));
    api_.easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);
    api_.easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    api_.easy_setopt(curl_, CURLOPT_USERAGENT, "tvmffi-jit/" TVMFFI_JIT_VERSION);
    api_.easy_setopt(curl_, CURLOPT_NOPROGRESS, 1L);
  }

  long perform(const char* method, const std::string& object, const Download* d) {
    CURLcode rc = api_.easy_perform(curl_);
    if ((d && d->too_large) || rc == CURLE_FILESIZE_EXCEEDED)
      throw io_error(std::string(method) + " " + object + ": the blob is larger than the limit (" +
                     std::to_string(d ? d->max : 0) + " bytes)");
    if (rc != CURLE_OK)
      throw io_error(std::string(method) + " " + shown_ + "/" + object + ": " + api_.easy_strerror(rc));
    long status = 0;
    api_.easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
    return status;
  }

  const CurlApi& api_;
  RemoteOptions options_;
  std::string base_, shown_, url_;
  CURL* curl_ = nullptr;
  curl_slist* headers_ = nullptr;
};

}  // namespace

std::unique_ptr<RemoteBackend> make_http_backend(const std::string& url, const RemoteOptions& options) {
  return std::make_unique<HttpBackend>(url, options);
}

}  // namespace tvmffi_jit::cache
