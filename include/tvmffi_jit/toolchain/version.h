// Asking a tool about itself (`<program> --version`, `nvcc --list-gpu-arch`):
// the one runner of such queries, so each asks the same way (LC_ALL=C, a
// timeout, a missing program as a reason rather than an error).
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::toolchain {

struct QueryOptions {
  double timeout_seconds = 20;
  bool merge_stderr = true;  // compilers print --version to either stream
};

// What `argv` prints on success. LC_ALL=C: a localised text must not give one
// compiler two identities. Why not, when argv[0] cannot be started (not
// found, not executable, not a format the kernel runs) or the command fails
// ("nvcc --list-gpu-arch: exit status 1").
Expected<std::string> query_program(const std::vector<std::string>& argv, const QueryOptions& options = {});

// query_program({program, "--version"}).
Expected<std::string> version_of(const std::string& program, const QueryOptions& options = {});

}  // namespace tvmffi_jit::toolchain
