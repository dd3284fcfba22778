// The values a module or object key holds that may name a path under the
// base directory (cache/portable.h), written portably: a checkout of the
// same project at another path must compute the same portable key. The
// cache rewrites paths (BaseDir::portable_path); what a compiler argument, a
// generated source or one of our step labels holds is known here.
#pragma once

#include <string>

#include "tvmffi_jit/cache/portable.h"

namespace tvmffi_jit::compile {

// A command-line argument: a path, or an option glued to one ("-I/base/x",
// "-L/base/lib", "--option=/base/x"). Anything else (-DX=/base/...) is kept:
// its text may reach the artifact.
std::string portable_arg(const cache::BaseDir& base, const std::string& arg);
// Generated source text: only `#include "/base/..."` lines are rewritten (the
// wrapper tvm_ffi generates around a source file includes it by its absolute
// path; the included content is keyed, the path is not output).
std::string portable_text(const cache::BaseDir& base, const std::string& text);
// A label of our own (a flag group's "compile /base/src/a.cc (c++ -> object)"):
// every occurrence of the base (or its canonical form) as a path prefix.
std::string portable_label(const cache::BaseDir& base, const std::string& label);

}  // namespace tvmffi_jit::compile
