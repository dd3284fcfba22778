// A descriptor closed on every way out of its scope (reads that check the
// very descriptor they opened: cache/proof.h, Store::record_stamps).
#pragma once

#include <unistd.h>

namespace tvmffi_jit::util {

struct ScopedFd {
  int fd = -1;
  ScopedFd() = default;
  explicit ScopedFd(int f) : fd(f) {}
  ~ScopedFd() {
    if (fd >= 0) ::close(fd);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
};

}  // namespace tvmffi_jit::util
