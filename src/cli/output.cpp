#include "output.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::cli {

namespace {

CapturedOutput* g_capture = nullptr;

void append_visible(std::string& out, std::string_view text) {
  for (char c : text) {
    if (c == '\0') out += "\\x00";
    else out += c;
  }
}

}  // namespace

void stdout_failed() {
  if (errno == EPIPE) {
    // The reader is gone (`| head`). SIGPIPE is ignored so that sockets and
    // child pipes report EPIPE (util/process.h); for stdout end as the
    // default action would have, quietly, with the status a shell expects.
    ::signal(SIGPIPE, SIG_DFL);
    ::raise(SIGPIPE);
  }
  throw io_error(errno_message("cannot write to stdout", errno));
}

void capture_output(CapturedOutput* to) { g_capture = to; }

void print_result(std::string_view text) {
  if (g_capture) {
    g_capture->out.append(text);
    return;
  }
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) stdout_failed();
}

void print_diagnostic(std::string_view where, std::string_view message) {
  std::string line = "tvmffi-jit: ";
  append_visible(line, where);
  line += ": ";
  append_visible(line, message);
  line += '\n';
  if (g_capture) {
    g_capture->err += line;
    return;
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tvmffi_jit::cli
