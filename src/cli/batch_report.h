// What `build` prints for a batch: the summary table on stderr and one JSON
// line per module on stdout (--json). Printers only; private to the cli layer.
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/compile/scheduler.h"

namespace tvmffi_jit::cli {

// One row per module, in input order, then a total line:
//   module   result  hits  built  seconds
//   add_one  built      0      2     3.2
//   ...
//   32 modules: 30 built, 1 hit, 1 failed, 0 skipped; objects 3 reused, 60 compiled; 41.2 s
std::string format_batch_summary(const std::vector<std::string>& names, const std::vector<compile::BatchItem>& items,
                                 double wall_seconds);

}  // namespace tvmffi_jit::cli
