#include "tvmffi_jit/util/jobserver.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::util {

Jobserver::Jobserver(int slots) : dir_("", "tvmffi-jit-jobserver-"), path_(join_path(dir_.path(), "fifo")) {
  if (::mkfifo(path_.c_str(), 0600) != 0) throw io_error(errno_message("cannot create the jobserver fifo " + path_, errno));
  // Read and write on one descriptor: the fifo never sees its last writer
  // or reader leave while the build runs, so a compiler's open never blocks.
  fd_ = ::open(path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw io_error(errno_message("cannot open the jobserver fifo " + path_, errno));
  makeflags_ = "-j" + std::to_string(slots > 0 ? slots : 1) + " --jobserver-auth=fifo:" + path_;
}

Jobserver::~Jobserver() {
  if (fd_ >= 0) ::close(fd_);
}

int Jobserver::put(int tokens) {
  const std::string bytes(static_cast<size_t>(tokens > 0 ? tokens : 0), '+');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // A full pipe holds 64 KiB of tokens, past any -j: what was not written
    // stays the gate's (a core idle at the tail, nothing worse).
    break;
  }
  return static_cast<int>(done);
}

int Jobserver::available() const {
  int bytes = 0;
  return ::ioctl(fd_, FIONREAD, &bytes) == 0 ? bytes : 0;
}

bool Jobserver::take() {
  char token = 0;
  for (;;) {
    const ssize_t n = ::read(fd_, &token, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;  // EAGAIN: every lent token is in use
  }
}

}  // namespace tvmffi_jit::util
