// Errors and exit codes: the one contract every layer shares.
//
// Layers throw tvmffi_jit::Error carrying the exit code the user should see;
// cli::run() catches it once, prints "tvmffi-jit: error: <message>" to stderr
// and returns the code. Messages say what went wrong, where (file, key, line)
// and what to do about it. Error is for what ends the command; a lookup whose
// failure is an ordinary answer ("found, or why not") returns an Expected
// (util/expected.h) and lets its caller decide. ARCHITECTURE.md, "Errors".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tvmffi_jit {

// Documented in README.md, --help and man/tvmffi-jit.1. Never renumber.
enum class ExitCode : int {
  kOk = 0,
  kBuildFailed = 1,      // a compiler or the linker failed
  kUsage = 2,            // bad command line or manifest; nothing was built
  kInvalid = 3,          // validation/inspection found an invalid file
  kMissingTool = 4,      // toolchain, tvm-ffi or (when asked for) the driver is missing
  kIo = 5,               // I/O or cache failure
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }
  int exit_code() const { return static_cast<int>(code_); }

 private:
  ExitCode code_;
};

// Shorthands, so call sites read as what happened.
inline Error usage_error(const std::string& m) { return Error(ExitCode::kUsage, m); }
inline Error io_error(const std::string& m) { return Error(ExitCode::kIo, m); }
inline Error missing_tool_error(const std::string& m) { return Error(ExitCode::kMissingTool, m); }
inline Error build_error(const std::string& m) { return Error(ExitCode::kBuildFailed, m); }
inline Error invalid_error(const std::string& m) { return Error(ExitCode::kInvalid, m); }

// "<what>: <strerror(errno)>" for system-call failures.
std::string errno_message(const std::string& what, int err);

// `text` in double quotes for a message, with what would garble or cut the
// line made visible: \" \\ \n \t, other control bytes (NUL included) as
// \xNN. Names from manifests and the command line go through this, so a NUL
// or an escape sequence in a name cannot cut or repaint the message.
// (Not "quoted": std::quoted would win overload resolution for a std::string argument.)
std::string quote_for_message(std::string_view text);

}  // namespace tvmffi_jit
