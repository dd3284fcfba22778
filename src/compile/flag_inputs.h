// Files a compiler or linker reads because a flag names them, beside the
// sources and the headers its depfile lists (docs/cache.md, "What a key
// covers"): they enter the key by content, and a file a flag would read if it
// existed enters as a probe ("absent"), so that it appearing changes the key
// (ccache's handling of these flags and its compiler_check=content).
//
//   @FILE               a response file: its content, and the flags in it
//                       (nested @FILEs included) as if given here
//   -specs=F, --specs=F a specs file; -fplugin=F a plugin: by content
//   -B DIR, -BDIR       the directory the driver takes its programs, specs
//                       and start files from: every file under it by content
//   -include H          H.gch (a precompiled header, file or directory) in
//                       the directories the compiler would look for H: by
//                       content, or as absent
//
// What cannot be keyed exactly -- a specs file or plugin named without a
// '/' (the driver searches its own directories for it), a -B prefix that is
// not a directory, a response file or -B tree past the size caps -- makes
// the build uncacheable: it builds and stores nothing, and says why under -v.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tvmffi_jit::compile {

struct FlagReads {
  std::vector<std::pair<std::string, std::string>> keyed;  // ("flag_input.<what>", "<path> <digest|absent>")
  std::optional<std::string> unkeyable;                    // why the step cannot be keyed exactly
};

// `flags` as the program is given them (no argv[0]); relative paths are the
// caller's working directory's. `include_dirs`: where -include's header is
// looked for after the working directory (compile/search_dirs.h).
FlagReads flag_reads(const std::vector<std::string>& flags, const std::vector<std::string>& include_dirs);

}  // namespace tvmffi_jit::compile
