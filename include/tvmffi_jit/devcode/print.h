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

// Human-readable tables, one block per file.
std::string format_text(const FileReport& report);

}  // namespace tvmffi_jit::devcode
