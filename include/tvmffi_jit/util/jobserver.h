// GNU make's jobserver, in the fifo form of make 4.4: job slots a build is not
// using, lent to the compilers it runs. nvcc --split-compile=N --jobserver
// reads a token (one byte) from the fifo MAKEFLAGS names before each extra
// thread of its cicc and ptxas passes, runs the pass on its own single thread
// when none is there, and writes the token back when the thread's pass ends.
// So a unit of unknown cost takes the cores that would idle (the tail of a
// batch) whatever it was estimated at, and never more than are idle.
#pragma once

#include <string>

#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::util {

class Jobserver {
 public:
  // A fifo in a new private folder (0700) under the temp root; throws
  // io_error when it cannot be made. `slots` is only written into MAKEFLAGS
  // (-jN), as make does.
  explicit Jobserver(int slots);
  ~Jobserver();
  Jobserver(const Jobserver&) = delete;
  Jobserver& operator=(const Jobserver&) = delete;

  // Lends `tokens` slots (they are in the fifo until a compiler thread
  // takes one); returns how many were written (never blocks).
  int put(int tokens);
  // One lent slot back, if a token is in the fifo now (never blocks).
  bool take();
  // Tokens in the fifo now (lent and not taken by a compiler thread).
  int available() const;
  // The MAKEFLAGS value of a child that may take tokens.
  const std::string& makeflags() const { return makeflags_; }
  const std::string& path() const { return path_; }

 private:
  TempDir dir_;
  std::string path_;
  std::string makeflags_;
  int fd_ = -1;
};

}  // namespace tvmffi_jit::util
