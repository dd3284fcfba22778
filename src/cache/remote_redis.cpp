// Redis backend: one string value per blob, through hiredis.
//
// hiredis is linked statically (Debian's libhiredis-dev ships libhiredis.a,
// which needs nothing but libc), so this backend costs the binary no run-time
// dependency. GET is GETRANGE 0..limit, so a value larger than the limit is
// never transferred whole: a reply longer than the limit is refused.
#include <hiredis/hiredis.h>

#include <sys/time.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "tvmffi_jit/cache/remote.h"
#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::cache {

namespace {

timeval to_timeval(int ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

struct RedisUrl {
  std::string host;
  int port = 6379;
  std::string user;
  std::string password;
  int db = 0;
};

// redis://[[user]:password@]host[:port][/db]  (checked by check_remote_urls)
RedisUrl parse_redis_url(const std::string& url) {
  RedisUrl u;
  std::string rest = url.substr(8);
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos && slash + 1 < rest.size()) u.db = std::atoi(rest.substr(slash + 1).c_str());
  size_t at = authority.rfind('@');
  if (at != std::string::npos) {
    std::string cred = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t colon = cred.find(':');
    if (colon == std::string::npos) {
      u.password = cred;
    } else {
      u.user = cred.substr(0, colon);
      u.password = cred.substr(colon + 1);
    }
  }
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']') == std::string::npos) {
    u.port = std::atoi(authority.substr(colon + 1).c_str());
    authority = authority.substr(0, colon);
  }
  u.host = authority;
  return u;
}

class RedisBackend : public RemoteBackend {
 public:
  RedisBackend(const std::string& url, const RemoteOptions& o) : shown_(redact_url(url)), options_(o) {
    RedisUrl u = parse_redis_url(url);
    ctx_ = redisConnectWithTimeout(u.host.c_str(), u.port, to_timeval(o.connect_timeout_ms));
    if (!ctx_) throw io_error("cannot connect: out of memory");
    if (ctx_->err) throw io_error(std::string("cannot connect: ") + ctx_->errstr);
    redisSetTimeout(ctx_, to_timeval(o.transfer_timeout_ms));
    if (!u.password.empty()) {
      if (u.user.empty()) command({"AUTH", u.password}, REDIS_REPLY_STATUS);
      else command({"AUTH", u.user, u.password}, REDIS_REPLY_STATUS);
    }
    if (u.db != 0) command({"SELECT", std::to_string(u.db)}, REDIS_REPLY_STATUS);
  }
  ~RedisBackend() override {
    if (ctx_) redisFree(ctx_);
  }

  std::optional<std::string> get(const std::string& object, uint64_t max_bytes) override {
    // GETRANGE's end is inclusive: asking for one byte more than the limit
    // tells an oversized value from one exactly at the limit.
    Reply r = command({"GETRANGE", key(object), "0", std::to_string(max_bytes)}, REDIS_REPLY_STRING);
    if (r.get()->len == 0) return std::nullopt;  // absent (an empty blob would be invalid anyway)
    if (r.get()->len > max_bytes)
      throw io_error("GET " + key(object) + ": the value is larger than the limit (" + std::to_string(max_bytes) + " bytes)");
    return std::string(r.get()->str, r.get()->len);
  }

  void put(const std::string& object, const std::string& blob) override {
    command({"SET", key(object), blob}, REDIS_REPLY_STATUS);
  }

 private:
  struct FreeReply {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  using Reply = std::unique_ptr<redisReply, FreeReply>;

  std::string key(const std::string& object) const {
    // "ns/key" -> "ns:key", Redis's usual separator.
    std::string k = object;
    size_t slash = k.rfind('/');
    if (slash != std::string::npos) k[slash] = ':';
    return k;
  }

  Reply command(const std::vector<std::string>& args, int expected_type) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) throw io_error(args[0] + ": " + (ctx_->errstr[0] ? ctx_->errstr : "connection lost"));
    if (r->type == REDIS_REPLY_ERROR) throw io_error(args[0] + " answered: " + std::string(r->str, r->len));
    if (r->type != expected_type) throw io_error(args[0] + ": unexpected reply type " + std::to_string(r->type));
    return r;
  }

  std::string shown_;
  RemoteOptions options_;
  redisContext* ctx_ = nullptr;
};

}  // namespace

std::unique_ptr<RemoteBackend> make_redis_backend(const std::string& url, const RemoteOptions& options) {
  return std::make_unique<RedisBackend>(url, options);
}

}  // namespace tvmffi_jit::cache
