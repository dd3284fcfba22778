// Between run_process (util/process.cpp) and the termination handler
// (util/termination.cpp): the slot through which the handler finds a running
// child's process group.
#pragma once

#include <sys/types.h>

#include <atomic>

namespace tvmffi_jit::util {

// One slot of the handler's fixed table of children's process groups, for
// the life of one child. Taking one waits while the table is full.
class ChildSlot {
 public:
  ChildSlot();
  ~ChildSlot();
  ChildSlot(const ChildSlot&) = delete;
  ChildSlot& operator=(const ChildSlot&) = delete;
  // From here on a termination signal is forwarded to `group`. A signal that
  // arrived before this store was not: the caller checks termination_signal()
  // after it.
  void set(pid_t group);

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

}  // namespace tvmffi_jit::util
