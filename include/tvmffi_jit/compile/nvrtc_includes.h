// The headers an NVRTC compile may read. NVRTC has no -M/-MD, so for the
// cache's header records (cache/headers.h) the #include lines are followed
// here instead: a superset of what the compile reads (both branches of an #if
// are followed), which can only cause a spurious miss, never a stale hit.
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/compile/nvrtc.h"

namespace tvmffi_jit::compile {

struct IncludeScan {
  std::vector<std::string> files;       // absolute paths of the headers found, in discovery order, once each
  std::vector<std::string> unresolved;  // "<file>:<line>: <name>": found in no directory (a dead #if branch,
                                        // or a header that does not exist yet: the list is then incomplete)
  std::vector<std::string> computed;    // "<file>:<line>": #include MACRO, whose target the scan cannot know
  std::vector<std::string> include_dirs;  // searched after the including file's own, in order, each absolute
                                          // and as the compiler opens it (util::opened_path); no system dirs
  bool complete() const { return unresolved.empty() && computed.empty(); }
};

// Follows `#include "..."` / `#include <...>` (and #include_next) from `source`
// (its text; `source_path` names it and its directory is searched first for
// quote includes, as the including file's directory is for every header)
// through `include_dirs` in order, then `system_dirs`. Headers found under a
// system dir are neither recorded nor followed: they belong to the toolkit,
// whose identity is in the key. Comments, line splices and string literals
// are understood; conditional compilation is not.
IncludeScan scan_includes(const std::string& source, const std::string& source_path,
                          const std::vector<std::string>& include_dirs, const std::vector<std::string>& system_dirs);

// scan_includes() for an NVRTC request: its include paths and the -I /
// --include-path / --pre-include options in request.options, with the
// toolkit directories of the libnvrtc nvrtc_compile() would use as system
// dirs. Throws Error(kMissingTool) like nvrtc_compile() when there is none.
IncludeScan nvrtc_includes(const NvrtcRequest& request);

// The toolkit header directories nvrtc_compile() adds (-I<toolkit>/include,
// -I<toolkit>/include/cccl) for the libnvrtc in use.
std::vector<std::string> nvrtc_toolkit_include_dirs();

}  // namespace tvmffi_jit::compile
