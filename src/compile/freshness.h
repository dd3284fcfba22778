// When an input changed relative to a build: what the cache refuses to record
// (a source or header that moved while it was read), by the clock the kernel
// stamps files with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/headers.h"

namespace tvmffi_jit::compile {

// Wall-clock time in ns, comparable with file ctime/mtime.
int64_t now_ns();

// Inputs whose status changed after `start_ns` may have been read in their
// old state; recording their new hash would let a stale artifact hit later
// (ccache's "too new include file"). The kernel stamps files with a coarse
// clock that lags real time, so a file written before `start_ns` never
// compares newer: no false alarms for the write-then-build pattern of JIT
// callers, at the price of missing an edit in the first tick (~4 ms) after it.
bool changed_since(const std::string& path, int64_t start_ns);

// The first of `headers` changed since `start_ns`, or nullopt.
std::optional<std::string> header_changed_during_build(const std::vector<cache::HeaderRecord>& headers,
                                                       int64_t start_ns);

}  // namespace tvmffi_jit::compile
