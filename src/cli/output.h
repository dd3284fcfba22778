// How every subcommand talks to the user; private to the cli layer.
//
// stdout carries results only (a path, a report, one JSON object), so it can
// be captured by shells and build systems; everything else is a diagnostic on
// stderr in one form, "tvmffi-jit: <where>: <message>", where <where> is the
// file the message is about, or "error" for what ended the command.
#pragma once

#include <string>
#include <string_view>

namespace tvmffi_jit::cli {

// Writes `text` to stdout and flushes it. Throws Error(kIo) when stdout
// cannot take it (a closed pipe, a full disk).
void print_result(std::string_view text);
// A write to stdout failed: with EPIPE (the reader closed the pipe) the
// process ends by SIGPIPE as it would have by default; otherwise throws
// io_error naming the cause.
[[noreturn]] void stdout_failed();

// Writes "tvmffi-jit: <where>: <message>\n" to stderr in one write. A NUL in
// either part is shown as \x00 instead of ending the line early.
void print_diagnostic(std::string_view where, std::string_view message);

// While set, print_result() appends to out and print_diagnostic() to err
// instead of writing to stdout/stderr: the engine library (engine.cpp) runs
// the CLI inside a Python process, whose streams are not its own. Null: the
// process's streams again.
struct CapturedOutput {
  std::string out;
  std::string err;
};
void capture_output(CapturedOutput* to);

}  // namespace tvmffi_jit::cli
