#include "compile/compiler_output.h"

#include "tvmffi_jit/util/progress.h"

namespace tvmffi_jit::compile {

namespace {

// Compiler output kept in an entry and replayed on a hit (as ccache replays a
// compile's stderr): whole up to this size, which holds any run of warnings
// worth reading; a flood (a template error cascade in a -w build gone wrong)
// is cut at a line end and says how much was dropped.
constexpr size_t kMaxStoredOutputBytes = 64 << 10;

}  // namespace

std::string capped_output(const std::string& text) {
  if (text.size() <= kMaxStoredOutputBytes) return text;
  size_t cut = text.rfind('\n', kMaxStoredOutputBytes - 1);
  cut = (cut == std::string::npos || cut == 0) ? kMaxStoredOutputBytes : cut + 1;
  // Never end inside a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "tvmffi-jit: [" + std::to_string(text.size() - cut) +
         " more bytes of compiler output were not kept in the cache]\n";
}

std::string compiler_output(const BuildResult& build) {
  std::string out;
  for (const auto* records : {&build.reused, &build.commands})
    for (const auto& c : *records)
      if (!c.output.empty()) out += c.output + (c.output.back() == '\n' ? "" : "\n");
  return capped_output(out);
}

void replay_output(const std::string& stored, const ExecuteOptions& exec) {
  if (stored.empty() || exec.hide_compiler_output) return;
  util::Progress::global().print_above(capped_output(stored));
}

}  // namespace tvmffi_jit::compile
