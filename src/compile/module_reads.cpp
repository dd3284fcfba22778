#include "compile/module_reads.h"

#include "compile/freshness.h"
#include "compile/search_dirs.h"
#include "tvmffi_jit/compile/nvrtc_includes.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

ModuleReads record_module_reads(const BuildPlan& plan, const BuildResult& build, const UnitCache& units,
                                const cache::Store& store, const CachedBuildOptions& options, int64_t build_start_ns,
                                int64_t key_start_ns) {
  std::optional<std::string> moved_header;
  std::vector<cache::HeaderRecord> headers = units.headers();  // everything the module's units read
  if (plan.nvrtc) {
    // NVRTC writes no depfile: record the headers its #include lines reach
    // (a superset; toolkit headers are covered by the NVRTC identity).
    IncludeScan scan = nvrtc_includes(plan.nvrtc->request);
    if (!scan.complete() && options.exec.verbose)
      spdlog::info("cache: {}: includes not followed: {}", plan.name,
                   util::join(scan.computed.empty() ? scan.unresolved : scan.computed, ", "));
    std::vector<cache::HeaderRecord> scanned =
        cache::hash_headers(scan.files, build.build_dir, {build.build_dir}, {});
    cache::merge_headers(headers, scanned);
    moved_header = header_changed_during_build(scanned, build_start_ns);
  }
  // What the linker read, recorded like headers: a rebuilt libdep.a behind
  // -L/-l must miss. A linker that wrote no list leaves nothing to check.
  std::optional<std::string> unrecorded_link;
  if (plan.link && !plan.link->depfile_name.empty()) {
    if (!build.link_dependencies) {
      unrecorded_link = "the linker wrote no " + plan.link->depfile_name + " (-Wl,--dependency-file, GNU ld 2.35+, "
                        "gold or lld), so the libraries it read cannot be checked on a hit";
    } else {
      std::vector<cache::HeaderRecord> linked =
          cache::hash_headers(*build.link_dependencies, build.build_dir, {build.build_dir}, {},
                              store.digest_memo(true));
      record_library_shadows(linked,
                                    library_search_dirs(*plan.link, build.build_dir, *options.environment));
      if (!moved_header) moved_header = header_changed_during_build(linked, build_start_ns);
      cache::merge_headers(headers, linked);
    }
  }
  // Objects reused from the cache were checked against their recorded
  // headers; a header of a unit compiled now that moved during the build may
  // have been read in its old state.
  if (!moved_header) moved_header = units.moved_header();
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& step : *steps)
      if (!moved_header && !step.generated_text && changed_since(step.input_path, key_start_ns))
        moved_header = step.input_path;
  return {std::move(headers), std::move(moved_header), std::move(unrecorded_link)};
}

}  // namespace tvmffi_jit::compile
