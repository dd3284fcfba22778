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

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "cache/remote/http.h"
#include "cache/remote/s3_errors.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/process.h"

namespace tvmffi_jit::cache {

namespace {

struct CurlApi {
  CURLcode (*global_init)(long);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
  // The multi interface runs the transfer in our loop, so the deadlines and
  // a termination signal are checked while it waits (easy_perform would
  // block until curl's own timeout).
  CURLM* (*multi_init)();
  CURLMcode (*multi_add_handle)(CURLM*, CURL*);
  CURLMcode (*multi_remove_handle)(CURLM*, CURL*);
  CURLMcode (*multi_perform)(CURLM*, int*);
  CURLMcode (*multi_wait)(CURLM*, curl_waitfd*, unsigned, int, int*);
  CURLMsg* (*multi_info_read)(CURLM*, int*);
  CURLMcode (*multi_cleanup)(CURLM*);
};

// `configured`: RemoteOptions::libcurl ($TVMFFI_JIT_LIBCURL, read by the
// CLI). Loaded once per process: the first backend's choice stands.
const CurlApi& curl_api(const std::string& configured) {
  static CurlApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [&configured] {
    std::string lib = configured.empty() ? "libcurl.so.4" : configured;
    // RTLD_LAZY: libcurl and its ~30 libraries are bound as used, not all at
    // load (a few ms of a remote hit); the functions used are dlsym()ed below.
    void* h = ::dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      error = "an http(s) remote cache needs libcurl, and " + lib + " could not be loaded (" + (e ? e : "?") +
              "): install libcurl4 (Debian/Ubuntu) or libcurl (Fedora/RHEL), point TVMFFI_JIT_LIBCURL at it, "
              "or remove the http remote (--remote / TVMFFI_JIT_REMOTE)";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (!fn && error.empty()) error = lib + " has no " + name + ": it is not a usable libcurl (7.28 or newer)";
    };
    sym(api.global_init, "curl_global_init");
    sym(api.easy_init, "curl_easy_init");
    sym(api.easy_setopt, "curl_easy_setopt");
    sym(api.easy_getinfo, "curl_easy_getinfo");
    sym(api.easy_cleanup, "curl_easy_cleanup");
    sym(api.easy_strerror, "curl_easy_strerror");
    sym(api.slist_append, "curl_slist_append");
    sym(api.slist_free_all, "curl_slist_free_all");
    sym(api.multi_init, "curl_multi_init");
    sym(api.multi_add_handle, "curl_multi_add_handle");
    sym(api.multi_remove_handle, "curl_multi_remove_handle");
    sym(api.multi_perform, "curl_multi_perform");
    sym(api.multi_wait, "curl_multi_wait");
    sym(api.multi_info_read, "curl_multi_info_read");
    sym(api.multi_cleanup, "curl_multi_cleanup");
    if (error.empty() && api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) error = "curl_global_init failed";
  });
  if (!error.empty()) throw missing_tool_error(error);
  return api;
}

using Clock = std::chrono::steady_clock;

// The answer's bytes, never more than `max` of them buffered. With a
// Content-Length (curl refuses one above the limit before any byte, through
// CURLOPT_MAXFILESIZE) the body is reserved once at its size; without one
// (chunked) bytes go into fixed-size blocks joined at the end, because a
// growing string's doubling would hold up to twice the limit.
struct Download {
  const CurlApi* api = nullptr;
  CURL* curl = nullptr;
  uint64_t max = 0;
  uint64_t total = 0;
  bool too_large = false;
  bool started = false;
  bool sized = false;
  std::string body;
  std::vector<std::string> blocks;
  static constexpr size_t kBlock = 1u << 20;

  bool add(const char* data, size_t n) {
    if (!started) {
      started = true;
      curl_off_t length = -1;
      if (api->easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK && length >= 0 &&
          static_cast<uint64_t>(length) <= max) {
        body.reserve(static_cast<size_t>(length));
        sized = true;
      }
    }
    if (total + n > max) {
      too_large = true;
      return false;
    }
    total += n;
    if (sized) {
      body.append(data, n);
      return true;
    }
    while (n > 0) {
      if (blocks.empty() || blocks.back().size() == kBlock) {
        blocks.emplace_back();
        blocks.back().reserve(kBlock);
      }
      size_t take = std::min(n, kBlock - blocks.back().size());
      blocks.back().append(data, take);
      data += take;
      n -= take;
    }
    return true;
  }

  std::string take() {
    if (sized || blocks.empty()) return std::move(body);
    std::string out;
    out.reserve(static_cast<size_t>(total));
    for (auto& b : blocks) {
      out += b;
      std::string().swap(b);  // freed as it is copied: the peak stays near `total`
    }
    return out;
  }
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* d = static_cast<Download*>(user);
  return d->add(data, size * count) ? size * count : 0;  // 0 aborts the transfer
}

// A PUT's reply: its first bytes are kept for the warning (an S3 error body
// says why), the rest is read and dropped.
constexpr size_t kKeptReplyBytes = 64 << 10;

size_t on_reply(char* data, size_t size, size_t count, void* user) {
  auto* kept = static_cast<std::string*>(user);
  size_t n = size * count;
  kept->append(data, std::min(n, kKeptReplyBytes - std::min(kKeptReplyBytes, kept->size())));
  return n;
}

// "HTTP 403 (AccessDenied: ...)": the status and, when the body is an S3
// error, what it says.
std::string answered(long status, const std::string& body) {
  std::string reason = s3_error_reason(body);
  return "HTTP " + std::to_string(status) + (reason.empty() ? "" : " (" + reason + ")");
}

// SHA-256 of the empty body (a GET's), as SigV4's x-amz-content-sha256 wants it.
constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// Any header line of the answer is its first byte.
size_t on_header(char*, size_t size, size_t count, void* user) {
  auto* first = static_cast<std::optional<Clock::time_point>*>(user);
  if (!*first) *first = Clock::now();
  return size * count;
}

struct Upload {
  const std::string* blob;
  size_t pos = 0;
  std::optional<Clock::time_point> sent;  // when the last byte was handed to curl
};

size_t on_read(char* buf, size_t size, size_t count, void* user) {
  auto* u = static_cast<Upload*>(user);
  size_t n = std::min(size * count, u->blob->size() - u->pos);
  std::memcpy(buf, u->blob->data() + u->pos, n);
  u->pos += n;
  if (u->pos == u->blob->size() && !u->sent) u->sent = Clock::now();
  return n;
}

// The host of an http(s) URL: between "://" (and any user@) and the port or path.
std::string host_of(const std::string& url) {
  size_t start = url.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  size_t end = url.find_first_of("/?#", start);
  std::string authority = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  if (!authority.empty() && authority[0] == '[') return authority.substr(0, authority.find(']') + 1);
  return authority.substr(0, authority.find(':'));
}

std::string seconds(int ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%g s", ms / 1000.0);
  return b;
}

class HttpBackend : public RemoteBackend {
 public:
  HttpBackend(std::string url, std::string shown, const RemoteOptions& o, HttpSigning signing,
              std::string unresolved_hint)
      : api_(curl_api(o.libcurl)), options_(o), signing_(std::move(signing)), unresolved_hint_(std::move(unresolved_hint)) {
    while (!url.empty() && url.back() == '/') url.pop_back();
    base_ = url;
    shown_ = std::move(shown);
    curl_ = api_.easy_init();
    multi_ = api_.multi_init();
    if (!curl_ || !multi_) remote_fault("curl_easy_init failed");
  }
  ~HttpBackend() override {
    api_.slist_free_all(headers_);
    if (multi_) api_.multi_cleanup(multi_);
    if (curl_) api_.easy_cleanup(curl_);
  }

  RemoteGet get(const std::string& object, uint64_t max_bytes) override {
    return guarded([&] { return download(object, max_bytes); });
  }

  RemotePut put(const std::string& object, const std::string& blob) override {
    return guarded([&] { upload(object, blob); });
  }

  std::string name() const override { return shown_; }

 private:
  std::optional<std::string> download(const std::string& object, uint64_t max_bytes) {
    Download d;
    d.api = &api_;
    d.curl = curl_;
    d.max = max_bytes;
    setup(object, kEmptySha256);
    api_.easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
    api_.easy_setopt(curl_, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_bytes));
    api_.easy_setopt(curl_, CURLOPT_WRITEFUNCTION, on_body);
    api_.easy_setopt(curl_, CURLOPT_WRITEDATA, &d);
    long status = perform("GET", object, &d, nullptr);
    std::string body = d.take();
    // Absent, unless an S3 server says the bucket itself is (an error to report).
    if (status == 404 && s3_error_code(body) != "NoSuchBucket") return std::nullopt;
    if (status != 200) remote_fault("GET " + object + " answered " + answered(status, body));
    return body;
  }

  void upload(const std::string& object, const std::string& blob) {
    Upload u{&blob, 0, std::nullopt};
    std::string reply;
    setup(object, signing_.aws_sigv4.empty() ? std::string() : util::sha256_hex(blob));
    api_.easy_setopt(curl_, CURLOPT_UPLOAD, 1L);
    api_.easy_setopt(curl_, CURLOPT_READFUNCTION, on_read);
    api_.easy_setopt(curl_, CURLOPT_READDATA, &u);
    api_.easy_setopt(curl_, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(blob.size()));
    api_.easy_setopt(curl_, CURLOPT_WRITEFUNCTION, on_reply);
    api_.easy_setopt(curl_, CURLOPT_WRITEDATA, &reply);
    long status = perform("PUT", object, nullptr, &u);
    if (status != 200 && status != 201 && status != 204)
      remote_fault("PUT " + object + " answered " + answered(status, reply));
  }

  // `content_sha256`: the body's SHA-256 for SigV4 (S3 wants it in a header,
  // and libcurl signs that header's value as the payload hash).
  void setup(const std::string& object, const std::string& content_sha256) {
    api_.easy_setopt(curl_, CURLOPT_UPLOAD, 0L);
    api_.easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
    url_ = base_ + "/" + object;
    api_.easy_setopt(curl_, CURLOPT_URL, url_.c_str());
    api_.easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    api_.easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
    // A backstop only: perform() enforces the deadlines with its own messages.
    api_.easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.transfer_timeout_ms) + 1000L);
    api_.easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);
    api_.slist_free_all(headers_);
    headers_ = nullptr;
    // "Expect: 100-continue" would stall every upload above 1 MiB for a second
    // on servers that do not answer it. Not for S3 (its servers answer it):
    // libcurl would sign the empty "Expect:" line it then does not send.
    if (signing_.aws_sigv4.empty()) headers_ = api_.slist_append(headers_, "Expect:");
    if (!signing_.aws_sigv4.empty()) {
      if (api_.easy_setopt(curl_, CURLOPT_AWS_SIGV4, signing_.aws_sigv4.c_str()) != CURLE_OK)
        throw missing_tool_error("the S3 remote " + shown_ + " signs its requests (AWS SigV4) through libcurl, and the "
                                 "libcurl loaded is older than 7.75: install a newer libcurl or point "
                                 "TVMFFI_JIT_LIBCURL at one");
      api_.easy_setopt(curl_, CURLOPT_USERNAME, signing_.key_id.c_str());
      api_.easy_setopt(curl_, CURLOPT_PASSWORD, signing_.secret.c_str());
      headers_ = api_.slist_append(headers_, ("x-amz-content-sha256: " + content_sha256).c_str());
      if (!signing_.session_token.empty())
        headers_ = api_.slist_append(headers_, ("x-amz-security-token: " + signing_.session_token).c_str());
    }
    api_.easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    api_.easy_setopt(curl_, CURLOPT_USERAGENT, "tvmffi-jit/" TVMFFI_JIT_VERSION);
    api_.easy_setopt(curl_, CURLOPT_NOPROGRESS, 1L);
    api_.easy_setopt(curl_, CURLOPT_HEADERFUNCTION, on_header);
    api_.easy_setopt(curl_, CURLOPT_HEADERDATA, &first_byte_);
  }

  // Runs the transfer in this thread, waking at least at the next deadline
  // and at once on a termination signal. The first-byte deadline runs from
  // when the request was sent: for a GET the connection (bounded by the
  // connect timeout), for a PUT its last byte.
  long perform(const char* method, const std::string& object, const Download* d, const Upload* u) {
    first_byte_ = std::nullopt;
    const auto start = Clock::now();
    const auto end = start + std::chrono::milliseconds(options_.transfer_timeout_ms);
    struct Attached {
      const CurlApi& api;
      CURLM* m;
      CURL* c;
      ~Attached() { api.multi_remove_handle(m, c); }
    } attached{api_, multi_, curl_};
    if (api_.multi_add_handle(multi_, curl_) != CURLM_OK) remote_fault(std::string(method) + ": curl_multi_add_handle failed");
    const std::string where = std::string(method) + " " + shown_ + "/" + object;
    CURLcode rc = CURLE_OK;
    for (;;) {
      int running = 0;
      if (api_.multi_perform(multi_, &running) != CURLM_OK) remote_fault(where + ": curl_multi_perform failed");
      if (running == 0) {
        int left = 0;
        while (CURLMsg* m = api_.multi_info_read(multi_, &left))
          if (m->msg == CURLMSG_DONE) rc = m->data.result;
        break;
      }
      const auto now = Clock::now();
      if (now >= end)
        remote_timeout(where + ": not finished within " + seconds(options_.transfer_timeout_ms) +
                       " (transfer deadline, TVMFFI_JIT_REMOTE_TIMEOUT)");
      std::optional<Clock::time_point> first_due;
      if (!first_byte_) {
        if (!u) first_due = start + std::chrono::milliseconds(options_.connect_timeout_ms + options_.first_byte_timeout_ms);
        else if (u->sent) first_due = *u->sent + std::chrono::milliseconds(options_.first_byte_timeout_ms);
      }
      if (first_due && now >= *first_due)
        remote_timeout(where + ": no answer within " + seconds(options_.first_byte_timeout_ms) +
                       " of the request (first-byte deadline, TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT)");
      auto due = first_due ? std::min(end, *first_due) : end;
      int wait_ms = static_cast<int>(std::clamp<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(due - now).count() + 1, 1, 1000));
      curl_waitfd wake{util::termination_wake_fd(), CURL_WAIT_POLLIN, 0};
      int numfds = 0;
      api_.multi_wait(multi_, wake.fd >= 0 ? &wake : nullptr, wake.fd >= 0 ? 1 : 0, wait_ms, &numfds);
      util::check_termination();
    }
    util::check_termination();
    if ((d && d->too_large) || rc == CURLE_FILESIZE_EXCEEDED)
      remote_too_large(where + ": the blob is larger than the limit (" + std::to_string(d ? d->max : 0) +
                       " bytes); not downloaded");
    // libcurl's own connect timeout (the others are checked above).
    if (rc == CURLE_OPERATION_TIMEDOUT) remote_timeout(where + ": " + api_.easy_strerror(rc));
    // Name the host that did not resolve (the URL may hide it: s3:// builds it).
    if (rc == CURLE_COULDNT_RESOLVE_HOST)
      remote_fault(where + ": " + api_.easy_strerror(rc) + " " + quote_for_message(host_of(base_)) + unresolved_hint_);
    if (rc != CURLE_OK) remote_fault(where + ": " + api_.easy_strerror(rc));
    long status = 0;
    api_.easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status);
    return status;
  }

  const CurlApi& api_;
  RemoteOptions options_;
  HttpSigning signing_;
  std::string unresolved_hint_;
  std::string base_, shown_, url_;
  CURL* curl_ = nullptr;
  CURLM* multi_ = nullptr;
  curl_slist* headers_ = nullptr;
  std::optional<Clock::time_point> first_byte_;
};

}  // namespace

std::unique_ptr<RemoteBackend> make_http_backend(const RemoteUrl& url, const RemoteOptions& options) {
  return std::make_unique<HttpBackend>(url.text, url.shown, options, HttpSigning{}, std::string());
}

std::unique_ptr<RemoteBackend> make_http_backend(std::string base_url, std::string shown, const RemoteOptions& options,
                                                 HttpSigning signing, std::string unresolved_hint) {
  return std::make_unique<HttpBackend>(std::move(base_url), std::move(shown), options, std::move(signing),
                                       std::move(unresolved_hint));
}

}  // namespace tvmffi_jit::cache
