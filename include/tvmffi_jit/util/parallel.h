// A small work pool for independent jobs (compiles, decompressions).
#pragma once

#include <cstddef>
#include <functional>

namespace tvmffi_jit::util {

// Runs job(0) .. job(count-1) on up to `workers` threads (<= 0: one per core),
// each index exactly once, in increasing order of start. The first exception
// stops further jobs from starting and is rethrown after every running job has
// returned, so a failing compile never leaves others writing behind our back.
void parallel_for(size_t count, int workers, const std::function<void(size_t)>& job);

}  // namespace tvmffi_jit::util
