// Printers for inspection reports: a readable table and the JSON object
// documented in docs/inspect.md. Parsers never print; printers never parse.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/devcode/report.h"

namespace tvmffi_jit::devcode {

// {"files":[...]} — see docs/inspect.md for the schema.
nlohmann::json to_json(const std::vector<FileReport>& reports);
nlohmann::json to_json(const FileReport& report);

// Streams the same document as to_json(reports) (compact, one line, keys in
// schema order) to `out`, so memory stays flat on libraries with tens of
// thousands of kernels. With threads > 1 the entries are formatted in
// parallel and written in order: the bytes do not depend on `threads`.
// Returns false if writing failed.
bool write_json(std::FILE* out, const std::vector<FileReport>& reports, unsigned threads = 1);

// Human-readable tables, one block per file.
std::string format_text(const FileReport& report);
// The same bytes as format_text, streamed to `out`, the per-entry kernel
// tables formatted by `threads` threads. Returns false if writing failed.
bool write_text(std::FILE* out, const FileReport& report, unsigned threads = 1);

}  // namespace tvmffi_jit::devcode
