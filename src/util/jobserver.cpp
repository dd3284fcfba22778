#include "tvmffi_jit/util/jobserver.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
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
  // A write of at most PIPE_BUF bytes to a fifo is whole or nothing (EAGAIN
  // when full, which 64 KiB of tokens never is at any -j): what was not
  // written stays the gate's (a core idle at the tail, nothing worse).
  const size_t n = std::min<size_t>(static_cast<size_t>(std::max(tokens, 0)), PIPE_BUF);
  if (n == 0 || !write_all(fd_, std::string(n, '+'))) return 0;
  return static_cast<int>(n);
}

int Jobserver::available() const {
  int bytes = 0;
  return ::ioctl(fd_, FIONREAD, &bytes) == 0 ? bytes : 0;
}

bool Jobserver::take() {
  char token = 0;
  auto n = read_some(fd_, &token, 1);  // EAGAIN: every lent token is in use
  return n && *n == 1;
}

}  // namespace tvmffi_jit::util
