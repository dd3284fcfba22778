// Redis backend: one string value per blob.
//
// The socket is ours, hiredis only parses replies (its redisReader). hiredis's
// own I/O cannot bound a transfer: its timeout applies to each read, so a
// server that drips one byte a second never times out, and it buffers a bulk
// reply whole, so a server claiming 3 GiB gets 3 GiB of memory. Here every
// request runs against three deadlines (connect, first byte, total: see
// RemoteOptions), every reply has a byte budget checked before the bytes are
// buffered, sends use MSG_NOSIGNAL (a server killed mid-upload is an error,
// not a SIGPIPE), and the wait includes the termination wake-up descriptor,
// so Ctrl-C ends a transfer at once.
//
// A download is STRLEN plus bounded GETRANGE chunks: the value's size is
// known (and refused above the limit) before anything is buffered, and no
// reply is larger than a chunk. hiredis is linked statically (Debian's
// libhiredis-dev ships libhiredis.a, which needs nothing but libc), so this
// backend costs the binary no run-time dependency.
#include <hiredis/hiredis.h>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cache/remote/backends.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/process.h"

namespace tvmffi_jit::cache {

namespace {

using Clock = std::chrono::steady_clock;

// The largest GETRANGE answer: bounds a reply's memory whatever the server
// claims, and is large enough that a 300 MB blob is 75 round trips.
constexpr uint64_t kChunkBytes = 4u << 20;
// A reply's framing around its payload ("$4194304\r\n...\r\n", ":12\r\n").
constexpr uint64_t kReplyOverhead = 64;

// RESP framing of one command, up to (not including) its last argument's
// bytes, so a blob is sent from where it lies instead of being copied.
std::string command_head(const std::vector<std::string_view>& args, size_t last_size) {
  std::string out = "*" + std::to_string(args.size() + 1) + "\r\n";
  for (std::string_view a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out.append(a.data(), a.size());
    out += "\r\n";
  }
  out += "$" + std::to_string(last_size) + "\r\n";
  return out;
}

std::string command(const std::vector<std::string_view>& args) {
  std::vector<std::string_view> head(args.begin(), args.end() - 1);
  return command_head(head, args.back().size()) + std::string(args.back()) + "\r\n";
}

struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, FreeReply>;

struct FreeReader {
  void operator()(redisReader* r) const { redisReaderFree(r); }
};

int ms_until(Clock::time_point t) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

class RedisBackend : public RemoteBackend {
 public:
  // Connects (and authenticates): raises a RemoteFault when it cannot.
  RedisBackend(const RemoteUrl& u, const RemoteOptions& o) : options_(o), shown_(u.shown) {
    connect(u.host, u.port);
    if (!u.password.empty()) {
      if (u.user.empty()) exchange_one({"AUTH", u.password}, REDIS_REPLY_STATUS, kReplyOverhead);
      else exchange_one({"AUTH", u.user, u.password}, REDIS_REPLY_STATUS, kReplyOverhead);
    }
    if (u.db != 0) exchange_one({"SELECT", std::to_string(u.db)}, REDIS_REPLY_STATUS, kReplyOverhead);
  }
  ~RedisBackend() override {
    if (fd_ >= 0) ::close(fd_);
  }

  RemoteGet get(const std::string& k, uint64_t max_bytes) override {
    return guarded([&] { return get_value(k, max_bytes); });
  }

  RemotePut put(const std::string& k, const std::string& blob) override {
    return guarded([&] {
      Transfer t(*this, "SET " + k);
      std::vector<Reply> r = t.exchange_with_payload(command_head({"SET", k}, blob.size()), blob, kReplyOverhead);
      expect(r[0], REDIS_REPLY_STATUS, "SET");
    });
  }

  std::string name() const override { return shown_; }

 private:
  std::optional<std::string> get_value(const std::string& k, uint64_t max_bytes) {
    Transfer t(*this, "GET " + k);
    const uint64_t first = std::min<uint64_t>(kChunkBytes, max_bytes);
    // STRLEN and the first chunk in one round trip: a small blob (most) costs
    // one, and a value above the limit costs at most one chunk.
    std::vector<Reply> r = t.exchange({command({"STRLEN", k}), getrange(k, 0, first)},
                                      {kReplyOverhead, first + kReplyOverhead});
    expect(r[0], REDIS_REPLY_INTEGER, "STRLEN");
    expect(r[1], REDIS_REPLY_STRING, "GETRANGE");
    if (r[0]->integer <= 0) return std::nullopt;  // absent (an empty blob would be invalid anyway)
    const uint64_t size = static_cast<uint64_t>(r[0]->integer);
    if (size > max_bytes)
      remote_too_large("GET " + k + ": the value has " + std::to_string(size) + " bytes, more than the limit (" +
                       std::to_string(max_bytes) + " bytes); not downloaded");
    std::string body;
    body.reserve(static_cast<size_t>(size));
    append_chunk(body, r[1], std::min(size, first), k);
    while (body.size() < size) {
      const uint64_t n = std::min<uint64_t>(kChunkBytes, size - body.size());
      std::vector<Reply> c = t.exchange({getrange(k, body.size(), n)}, {n + kReplyOverhead});
      expect(c[0], REDIS_REPLY_STRING, "GETRANGE");
      append_chunk(body, c[0], n, k);
    }
    return body;
  }

  // One request of the tier (a whole GET or PUT): the total deadline runs
  // from its start, across every round trip it needs.
  class Transfer {
   public:
    Transfer(RedisBackend& b, std::string what)
        : b_(b), what_(std::move(what)), end_(Clock::now() + std::chrono::milliseconds(b.options_.transfer_timeout_ms)) {}

    std::vector<Reply> exchange(const std::vector<std::string>& commands, const std::vector<uint64_t>& budgets) {
      std::string out;
      for (const auto& c : commands) out += c;
      uint64_t budget = 0;
      for (uint64_t x : budgets) budget += x;
      return run(out, {}, commands.size(), budget);
    }
    std::vector<Reply> exchange_with_payload(const std::string& head, std::string_view payload, uint64_t budget) {
      return run(head, payload, 1, budget);
    }

   private:
    // Sends head + payload + "\r\n" (when there is a payload), then reads
    // `count` replies, never more than `budget` bytes in all.
    std::vector<Reply> run(std::string_view head, std::string_view payload, size_t count, uint64_t budget) {
      if (b_.fd_ < 0) remote_fault(what_ + ": the connection broke during an earlier request");
      const std::string_view parts[] = {head, payload, payload.empty() ? std::string_view() : "\r\n"};
      size_t part = 0, offset = 0;
      std::optional<Clock::time_point> first_byte_due;
      uint64_t received = 0;
      std::unique_ptr<redisReader, FreeReader> reader(redisReaderCreate());
      if (!reader) remote_fault(what_ + ": out of memory");
      std::vector<Reply> replies;
      char buf[65536];
      while (replies.size() < count) {
        while (part < 3 && offset == parts[part].size()) {
          ++part;
          offset = 0;
        }
        const bool sending = part < 3;
        if (!sending && !first_byte_due)
          first_byte_due = Clock::now() + std::chrono::milliseconds(b_.options_.first_byte_timeout_ms);
        Clock::time_point due = end_;
        bool first_byte_bound = false;
        if (first_byte_due && received == 0 && *first_byte_due < due) {
          due = *first_byte_due;
          first_byte_bound = true;
        }
        pollfd fds[2] = {{b_.fd_, static_cast<short>(POLLIN | (sending ? POLLOUT : 0)), 0},
                         {util::termination_wake_fd(), POLLIN, 0}};
        const int n = poll(fds, fds[1].fd >= 0 ? 2 : 1, ms_until(due));
        util::check_termination();
        if (n < 0) {
          if (errno == EINTR) continue;
          remote_fault(errno_message(what_ + ": poll", errno));
        }
        if (n == 0) {
          b_.broken();
          if (first_byte_bound)
            remote_timeout(what_ + ": no answer within " + seconds(b_.options_.first_byte_timeout_ms) +
                           " of the request (first-byte deadline, TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT)");
          remote_timeout(what_ + ": not finished within " + seconds(b_.options_.transfer_timeout_ms) +
                         " (transfer deadline, TVMFFI_JIT_REMOTE_TIMEOUT)");
        }
        if (sending && (fds[0].revents & POLLOUT)) {
          const std::string_view p = parts[part].substr(offset);
          ssize_t w = ::send(b_.fd_, p.data(), std::min<size_t>(p.size(), 1u << 20), MSG_NOSIGNAL);
          if (w < 0 && errno != EAGAIN && errno != EINTR) fail_io("send");
          if (w > 0) offset += static_cast<size_t>(w);
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
          // Never buffer past the budget: read at most what is still allowed
          // (plus one byte, to tell "exactly the budget" from "more").
          const size_t room = static_cast<size_t>(std::min<uint64_t>(sizeof buf, budget + 1 - received));
          ssize_t r = ::recv(b_.fd_, buf, room, 0);
          if (r < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            fail_io("recv");
          }
          if (r == 0) {
            b_.broken();
            remote_fault(what_ + ": the server closed the connection");
          }
          received += static_cast<uint64_t>(r);
          if (received > budget) {
            b_.broken();
            remote_fault(what_ + ": the server sent more than the " + std::to_string(budget) +
                           " bytes the request allows (a reply larger than asked for)");
          }
          if (redisReaderFeed(reader.get(), buf, static_cast<size_t>(r)) != REDIS_OK) protocol_error(reader.get());
          for (;;) {
            void* reply = nullptr;
            if (redisReaderGetReply(reader.get(), &reply) != REDIS_OK) protocol_error(reader.get());
            if (!reply) break;
            replies.emplace_back(static_cast<redisReply*>(reply));
          }
        }
      }
      if (replies.size() > count) {
        b_.broken();
        remote_fault(what_ + ": the server sent replies nobody asked for");
      }
      return replies;
    }

    [[noreturn]] void fail_io(const char* call) {
      int e = errno;
      b_.broken();
      remote_fault(errno_message(what_ + ": " + call, e));
    }
    [[noreturn]] void protocol_error(redisReader* r) {
      b_.broken();
      remote_fault(what_ + ": not a Redis reply (" + std::string(r->errstr) + ")");
    }
    static std::string seconds(int ms) {
      char b[32];
      std::snprintf(b, sizeof b, "%g s", ms / 1000.0);
      return b;
    }

    RedisBackend& b_;
    std::string what_;
    Clock::time_point end_;
  };

  static std::string getrange(const std::string& k, uint64_t offset, uint64_t size) {
    // GETRANGE's end is inclusive.
    return command({"GETRANGE", k, std::to_string(offset), std::to_string(offset + size - 1)});
  }

  static void expect(const Reply& r, int type, const char* what) {
    if (r->type == REDIS_REPLY_ERROR) remote_fault(std::string(what) + " answered: " + std::string(r->str, r->len));
    if (r->type != type) remote_fault(std::string(what) + ": unexpected reply type " + std::to_string(r->type));
  }

  static void append_chunk(std::string& body, const Reply& r, uint64_t expected, const std::string& k) {
    // Shorter: the value was replaced by a smaller one between STRLEN and now.
    if (static_cast<uint64_t>(r->len) != expected)
      remote_fault("GET " + k + ": the value changed during the download (another client replaced it)");
    body.append(r->str, r->len);
  }

  void exchange_one(const std::vector<std::string>& args, int type, uint64_t budget) {
    std::vector<std::string_view> v(args.begin(), args.end());
    Transfer t(*this, args[0]);
    std::vector<Reply> r = t.exchange({command(v)}, {budget});
    expect(r[0], type, args[0].c_str());
  }

  void connect(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) remote_fault("cannot connect: cannot resolve " + host + ": " + gai_strerror(rc));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
    const auto due = Clock::now() + std::chrono::milliseconds(options_.connect_timeout_ms);
    std::string last = "no address";
    bool timed_out = false;
    for (addrinfo* a = res; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      int e = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (e == EINPROGRESS) {
        pollfd fds[2] = {{fd, POLLOUT, 0}, {util::termination_wake_fd(), POLLIN, 0}};
        int n;
        do n = poll(fds, fds[1].fd >= 0 ? 2 : 1, ms_until(due));
        while (n < 0 && errno == EINTR);
        if (util::termination_signal() != 0) {
          ::close(fd);
          util::check_termination();
        }
        if (n == 0) {
          e = ETIMEDOUT;
        } else {
          socklen_t len = sizeof e;
          if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) e = errno;
        }
      }
      if (e == 0) {
        fd_ = fd;
        return;
      }
      ::close(fd);
      timed_out = e == ETIMEDOUT;
      last = timed_out ? "Connection timed out" : std::strerror(e);
      if (Clock::now() >= due) break;
    }
    if (timed_out) remote_timeout("cannot connect: " + last);
    remote_fault("cannot connect: " + last);
  }

  // After a timeout or a broken reply the stream is out of step: never reuse it.
  void broken() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  RemoteOptions options_;
  std::string shown_;
  int fd_ = -1;
};

}  // namespace

std::unique_ptr<RemoteBackend> make_redis_backend(const RemoteUrl& url, const RemoteOptions& options) {
  return std::make_unique<RedisBackend>(url, options);
}

}  // namespace tvmffi_jit::cache
