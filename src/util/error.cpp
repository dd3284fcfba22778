#include "tvmffi_jit/util/error.h"

#include <cstring>

namespace tvmffi_jit {

std::string errno_message(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

}  // namespace tvmffi_jit
