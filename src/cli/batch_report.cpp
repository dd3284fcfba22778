#include "batch_report.h"

#include <algorithm>

#include "tvmffi_jit/util/strings.h"
#include <cstdio>

namespace tvmffi_jit::cli {

using util::pad_left;
using util::pad_right;

namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}


}  // namespace

std::string format_batch_summary(const std::vector<std::string>& names, const std::vector<compile::BatchItem>& items,
                                 double wall_seconds) {
  size_t name_width = 6;
  for (const auto& n : names) name_width = std::max(name_width, n.size());
  std::string out = pad_right("module", name_width) + "  result   " + pad_left("hits", 5) + "  " + pad_left("built", 5) +
                    "  " + pad_left("seconds", 7) + "\n";
  size_t counts[4] = {0, 0, 0, 0};
  size_t reused = 0, compiled = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& it = items[i];
    ++counts[static_cast<int>(it.status)];
    reused += it.objects_reused;
    compiled += it.objects_compiled;
    const bool ran = it.status != compile::BatchStatus::kSkipped;
    out += pad_right(names[i], name_width) + "  " + pad_right(compile::batch_status_name(it.status), 7) + "  " +
           pad_left(ran ? std::to_string(it.objects_reused) : "-", 5) + "  " +
           pad_left(ran ? std::to_string(it.objects_compiled) : "-", 5) + "  " +
           pad_left(ran ? seconds_text(it.seconds) : "-", 7) + "\n";
  }
  using S = compile::BatchStatus;
  out += std::to_string(items.size()) + " modules: " + std::to_string(counts[static_cast<int>(S::kBuilt)]) + " built, " +
         std::to_string(counts[static_cast<int>(S::kHit)]) + " hit, " + std::to_string(counts[static_cast<int>(S::kFailed)]) +
         " failed, " + std::to_string(counts[static_cast<int>(S::kSkipped)]) + " skipped; objects " +
         std::to_string(reused) + " reused, " + std::to_string(compiled) + " compiled; " + seconds_text(wall_seconds) +
         " s\n";
  return out;
}

}  // namespace tvmffi_jit::cli
