// Driver validation, step 3: the verdicts, from what the child said and the
// offline reports (which image the driver should have picked, its kernels and
// their figures).
#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include "arch_select.h"
#include "validate_internal.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::driver {

namespace {

// First line of a (possibly long) log, for one-line messages.
std::string first_lines(const std::string& log, size_t max_lines = 2) {
  auto lines = util::split_lines(log);
  if (lines.size() > max_lines) lines.resize(max_lines);
  return util::join(lines, " | ");
}

void apply_image_result(ImageVerdict& img, const ProbeResult& r) {
  img.error_log = r.error_log;
  img.info_log = r.info_log;
  img.failed_step = r.failed_step;
  img.result = r.result;
  img.driver_kernel_count = r.kernel_count;
  img.kernels = r.kernels;
}

void apply_module_result(ModuleLoadVerdict& m, const ProbeResult& r) {
  m.loaded = r.loaded;
  m.error = r.error;
  std::map<std::string, bool> resolved(r.symbols.begin(), r.symbols.end());
  for (auto& [sym, ok] : m.symbols) {
    auto it = resolved.find(sym);
    ok = it != resolved.end() && it->second;
  }
}

// Driver figures against the offline parse, after the documented conversions.
std::vector<AttributeMismatch> compare_attributes(const devcode::Entry& e, const devcode::Kernel& k,
                                                  const DriverKernel& dk) {
  std::vector<AttributeMismatch> out;
  if (!dk.attributes_read || e.kind != devcode::EntryKind::kElf) return out;  // PTX: no offline figures
  const KernelAttributes& a = dk.attributes;
  auto check = [&](const char* what, long long driver, long long offline) {
    if (driver >= 0 && driver != offline) out.push_back({dk.name, what, driver, offline});
  };
  if (k.registers) check("registers", a.num_regs, *k.registers);
  if (k.shared_bytes) {
    // sm_90+ ET_EXEC cubins carry a 1 KiB base in .nv.shared.<k> that the
    // driver does not count (docs/formats.md, "Shared memory").
    auto arch = parse_arch(e.arch);
    uint64_t shared = *k.shared_bytes;
    if (e.elf_type == "exec" && arch && arch->major >= 9 && shared >= 0x400) shared -= 0x400;
    check("shared", a.shared_size_bytes, static_cast<long long>(shared));
  }
  if (k.stack_bytes || k.local_bytes) {
    // LOCAL_SIZE_BYTES is the per-thread frame (EIATTR_FRAME_SIZE) plus .nv.local.
    long long local = static_cast<long long>(k.stack_bytes.value_or(0) + k.local_bytes.value_or(0));
    long long alt = static_cast<long long>(k.min_stack_bytes.value_or(0) + k.local_bytes.value_or(0));
    if (a.local_size_bytes >= 0 && a.local_size_bytes != local && a.local_size_bytes != alt)
      out.push_back({dk.name, "local", a.local_size_bytes, local});
  }
  {
    // CONST_SIZE_BYTES is the module's user constant bank (bank 3), for every kernel.
    long long user_const = 0;
    for (const auto& [bank, bytes] : e.constant_banks)
      if (bank == 3) user_const = static_cast<long long>(bytes);
    check("const", a.const_size_bytes, user_const);
  }
  if (k.max_threads) check("max_threads", a.max_threads_per_block, static_cast<long long>(*k.max_threads));
  if (auto arch = parse_arch(e.arch); arch && !arch->ptx)
    check("binary_version", a.binary_version, arch->major * 10 + arch->minor);
  if (k.cluster_dims && a.cluster_width >= 0) {
    check("cluster_x", a.cluster_width, k.cluster_dims->x);
    check("cluster_y", a.cluster_height, k.cluster_dims->y);
    check("cluster_z", a.cluster_depth, k.cluster_dims->z);
  }
  return out;
}

void judge_image(ImageVerdict& img, const std::vector<const devcode::Entry*>& entries, const DriverInfo& drv) {
  std::optional<size_t> chosen = select_image(archs_of(entries), drv.cc_major, drv.cc_minor);
  std::set<std::string> offline_names;
  if (chosen) {
    const devcode::Entry& e = *entries[*chosen];
    img.offline_entry = static_cast<int>(e.index);
    img.offline_arch = e.arch;
    for (const auto& k : e.kernels) offline_names.insert(k.name);
  } else {
    for (const auto* e : entries)
      for (const auto& k : e->kernels) offline_names.insert(k.name);
  }
  img.offline_kernel_count = offline_names.size();

  std::set<std::string> driver_names;
  for (const auto& k : img.kernels)
    if (k.enumerated) driver_names.insert(k.name);
  if (chosen) {
    // The first offline kernel of each name, looked up once per driver kernel.
    const devcode::Entry& e = *entries[*chosen];
    std::unordered_map<std::string_view, const devcode::Kernel*> by_name;
    for (const auto& k : e.kernels) by_name.emplace(k.name, &k);
    for (const auto& k : img.kernels) {
      auto it = by_name.find(k.name);
      if (it == by_name.end()) continue;
      auto m = compare_attributes(e, *it->second, k);
      img.mismatches.insert(img.mismatches.end(), m.begin(), m.end());
    }
  }

  auto where = "entry " + std::to_string(img.entry) + (img.source == "file" ? "" : " (" + img.source + ")");
  if (!img.failed_step.empty()) {
    img.problem = where + ": " + img.failed_step + " returned " + img.result;
    if (!img.error_log.empty()) img.problem += "; JIT error log: " + first_lines(img.error_log);
    return;
  }
  if (!img.error_log.empty()) {
    img.problem = where + ": the JIT error log is not empty: " + first_lines(img.error_log);
    return;
  }
  size_t driver_count = img.driver_kernel_count ? *img.driver_kernel_count : img.kernels.size();
  if (driver_count != img.offline_kernel_count) {
    img.problem = where + ": the driver lists " + std::to_string(driver_count) + " kernel(s), the offline parse " +
                  std::to_string(img.offline_kernel_count) +
                  (img.offline_arch.empty() ? "" : " (" + img.offline_arch + ")");
    return;
  }
  if (img.driver_kernel_count) {
    std::vector<std::string> missing;
    for (const auto& n : offline_names)
      if (!driver_names.count(n)) missing.push_back(n);
    if (!missing.empty()) {
      img.problem = where + ": offline kernel(s) not listed by the driver: " + util::join(missing, ", ");
      return;
    }
  }
  img.valid = true;
}

// The module item: dlopen's death, its result, or no answer at all.
void judge_module_item(FileVerdict& v, const Item& item, const ProbeOutcome& outcome) {
  if (auto d = outcome.deaths.find(item.request.id); d != outcome.deaths.end()) {
    v.module.error = d->second + " while loading the module (dlopen)";
  } else if (auto r = outcome.results.find(item.request.id); r != outcome.results.end()) {
    apply_module_result(v.module, r->second);
  } else {
    v.module.error = "the driver probe returned no result for the module";
  }
}

// "driver crashed with SIGSEGV while loading entry 2 (...) in cuLibraryLoadFromFile"
void note_image_crash(ImageVerdict& img, const std::string& death) {
  img.crashed = true;
  img.problem = death;
  std::string where = " while loading entry " + std::to_string(img.entry) +
                      (img.source == "file" ? "" : " (" + img.source + ")");
  size_t in = img.problem.find(" in ");
  size_t during = img.problem.find(" during ");
  size_t cut = std::min(in, during);
  img.problem.insert(cut == std::string::npos ? img.problem.size() : cut, where);
}

// An image item: the child's death while loading it, no answer, skipped,
// or the driver's answer judged against the offline parse.
void judge_image_item(ImageVerdict& img, const Item& item, const ProbeOutcome& outcome, const DriverInfo& info) {
  if (auto d = outcome.deaths.find(item.request.id); d != outcome.deaths.end()) {
    note_image_crash(img, d->second);
    return;
  }
  auto r = outcome.results.find(item.request.id);
  if (r == outcome.results.end()) {
    img.problem = "entry " + std::to_string(img.entry) + ": the driver probe returned no result";
    return;
  }
  if (r->second.skipped) {
    img.failed_step = "skipped";
    img.problem = *r->second.skipped;
    return;
  }
  apply_image_result(img, r->second);
  judge_image(img, item.entries, info);
}

// The first problem of a file the driver loaded: an image's, else the module's.
std::string first_file_problem(const FileVerdict& v) {
  for (const auto& img : v.images)
    if (img.failed_step != "skipped" && !img.valid && !img.problem.empty()) return img.problem;
  if (!v.module.checked) return "";
  if (!v.module.error.empty()) return "dlopen of the module failed: " + v.module.error;
  std::vector<std::string> missing;
  for (const auto& [sym, ok] : v.module.symbols)
    if (!ok) missing.push_back(sym);
  if (!missing.empty()) return "module loaded but symbol(s) not found: " + util::join(missing, ", ");
  return "";
}

// "valid: 3 kernel(s) in 2 entries on NVIDIA H100 (sm_90), module loads, ..."
std::string valid_file_message(const FileVerdict& v) {
  size_t kernels = 0, mismatches = 0;
  for (const auto& img : v.images) {
    if (img.failed_step == "skipped") continue;
    kernels += img.driver_kernel_count.value_or(img.kernels.size());
  }
  for (const auto& img : v.images) mismatches += img.mismatches.size();
  std::string message = "valid: " + std::to_string(kernels) + " kernel(s) in " + std::to_string(v.images.size()) +
                        " entr" + (v.images.size() == 1 ? "y" : "ies");
  if (!v.driver.device_name.empty())
    message += " on " + v.driver.device_name + " (sm_" + std::to_string(v.driver.cc_major) +
               std::to_string(v.driver.cc_minor) + ")";
  if (v.module.checked)
    message += ", module loads, " + std::to_string(v.module.symbols.size()) + " function(s) resolved";
  if (mismatches) message += "; " + std::to_string(mismatches) + " attribute mismatch(es) with the offline parse";
  return message;
}

// A file's verdict from its images' and module's.
void judge_file(FileVerdict& v, bool driver_reported, bool any_items) {
  if (!v.offline_valid) {
    // Only reached the driver under the test hook; report what it did.
    for (const auto& img : v.images)
      v.message += "; the driver (loaded anyway): " + (img.valid ? std::string("accepted it") : img.problem);
    return;
  }
  if (!driver_reported && any_items) v.driver.reason = "the driver probe reported nothing";
  const bool no_driver =
      std::any_of(v.images.begin(), v.images.end(), [](const ImageVerdict& img) { return img.failed_step == "skipped"; });
  if (std::string problem = first_file_problem(v); !problem.empty()) {
    v.verdict = Verdict::kInvalid;
    v.message = problem;
  } else if (no_driver) {
    v.verdict = Verdict::kNoDriver;
    // A driver that answered but has no usable device is "no device".
    v.message = std::string(v.driver.available ? "no device: " : "no driver: ") +
                (v.driver.reason.empty() ? std::string("unavailable") : v.driver.reason);
  } else {
    v.verdict = Verdict::kValid;
    v.message = valid_file_message(v);
  }
}

}  // namespace

void judge(Plan& plan, const ProbeOutcome& outcome) {
  const DriverInfo info = outcome.driver.value_or(DriverInfo{});
  for (const Item& item : plan.items) {
    FileVerdict& v = plan.verdicts[item.file];
    v.driver = info;
    if (item.request.kind == ProbeItem::Kind::kModule) judge_module_item(v, item, outcome);
    else judge_image_item(v.images[item.image], item, outcome, info);
  }
  for (FileVerdict& v : plan.verdicts) judge_file(v, outcome.driver.has_value(), !plan.items.empty());
}

}  // namespace tvmffi_jit::driver
