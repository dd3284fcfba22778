#include "tvmffi_jit/driver/validate.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <map>
#include <set>

#include "arch_select.h"
#include "probe_protocol.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::driver {

using nlohmann::json;

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kValid: return "valid";
    case Verdict::kInvalid: return "invalid";
    case Verdict::kNoDriver: return "no-driver";
  }
  return "invalid";
}

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buf, static_cast<size_t>(n));
}

// First line of a (possibly long) log, for one-line messages.
std::string first_lines(const std::string& log, size_t max_lines = 2) {
  auto lines = util::split_lines(log);
  if (lines.size() > max_lines) lines.resize(max_lines);
  return util::join(lines, " | ");
}

// One unit of work for the child: load an image, or dlopen a module.
struct Item {
  int id = 0;
  size_t file = 0;   // index into the verdicts
  size_t image = 0;  // index into FileVerdict::images (images only)
  bool is_module = false;
  json request;
  // Offline entries this image may be served from (the driver picks one).
  std::vector<const devcode::Entry*> entries;
};

// Offline entries that live inside [offset, offset + size) of the file.
std::vector<const devcode::Entry*> entries_in_range(const devcode::FileReport& r, uint64_t offset,
                                                    uint64_t size) {
  std::vector<const devcode::Entry*> out;
  for (const auto& e : r.entries)
    if (e.header_offset >= offset && e.header_offset - offset < size) out.push_back(&e);
  return out;
}

bool loadable(const devcode::Entry& e) {
  return (e.kind == devcode::EntryKind::kElf || e.kind == devcode::EntryKind::kPtx) && e.error.empty();
}

// The devcode arch string for a PTX entry is "compute_XY"; for ELF "sm_XY".
std::vector<std::string> archs_of(const std::vector<const devcode::Entry*>& entries) {
  std::vector<std::string> out;
  for (const auto* e : entries) out.push_back(loadable(*e) ? e->arch : std::string());
  return out;
}

json candidates_json(const std::vector<const devcode::Entry*>& entries) {
  json out = json::array();
  for (const auto* e : entries) {
    json names = json::array();
    for (const auto& k : e->kernels) names.push_back(k.name);
    out.push_back({{"arch", loadable(*e) ? e->arch : std::string()}, {"names", names}});
  }
  return out;
}

struct Plan {
  std::vector<FileVerdict> verdicts;
  std::vector<Item> items;
  std::optional<util::TempDir> temp;
};

std::string temp_dir(Plan& plan, const ValidateOptions& o) {
  if (!plan.temp) plan.temp.emplace(o.temp_parent, "tvmffi-jit-validate-");
  return plan.temp->path();
}

bool ungated() {
  const char* e = std::getenv(kUngatedEnv);
  return e && std::string(e) == "1";
}

std::string find_tvm_ffi_library(const ValidateOptions& o, std::string* why) {
  if (!o.tvm_ffi_library.empty()) return o.tvm_ffi_library;
  // An explicit library, for machines that run modules without a tvm-ffi
  // installation (only the shared library copied beside them).
  if (const char* env = std::getenv("TVMFFI_JIT_TVM_FFI_LIB"); env && *env) return env;
  try {
    auto loc = toolchain::find_tvm_ffi(toolchain::TvmFfiSearch{});
    return util::join_path(loc.lib_dir, "libtvm_ffi.so");
  } catch (const Error& e) {
    *why = e.what();
    return "";
  }
}

void plan_file(Plan& plan, size_t fi, const devcode::FileReport& r, const ValidateOptions& o) {
  FileVerdict& v = plan.verdicts[fi];
  v.path = r.path;
  if (!r.ok()) {
    // Never hand a malformed file to the driver: truncated cubins crash it.
    v.offline_valid = false;
    v.verdict = Verdict::kInvalid;
    v.message = "offline structure check failed: " + r.error;
    bool stand_alone = r.format == devcode::FileFormat::kCubin || r.format == devcode::FileFormat::kFatbin ||
                       r.format == devcode::FileFormat::kPtx;
    if (!ungated() || !stand_alone) return;
    // Test hook (docs/driver.md): load it anyway, to exercise crash isolation
    // on a real driver. The verdict stays invalid whatever the driver says.
    v.notes.push_back(std::string(kUngatedEnv) + " is set: loaded although the offline check failed");
  }
  auto add_image = [&](const std::string& source, const std::string& path,
                       std::vector<const devcode::Entry*> entries) {
    ImageVerdict img;
    img.entry = static_cast<int>(v.images.size()) + 1;
    // Refined to the entry the driver picks once the device is known.
    std::set<std::string> names;
    for (const auto* e : entries)
      for (const auto& k : e->kernels) names.insert(k.name);
    img.offline_kernel_count = names.size();
    img.source = source;
    img.loaded_path = path;
    Item item;
    item.id = static_cast<int>(plan.items.size()) + 1;
    item.file = fi;
    item.image = v.images.size();
    item.entries = std::move(entries);
    item.request = {{"id", item.id}, {"kind", "image"}, {"path", path},
                    {"candidates", candidates_json(item.entries)}};
    v.images.push_back(std::move(img));
    plan.items.push_back(std::move(item));
  };
  using devcode::FileFormat;
  switch (r.format) {
    case FileFormat::kCubin:
    case FileFormat::kFatbin:
    case FileFormat::kPtx: {
      std::vector<const devcode::Entry*> entries;
      for (const auto& e : r.entries) entries.push_back(&e);
      add_image("file", util::absolute_path(r.path), std::move(entries));
      break;
    }
    case FileFormat::kHostElf: {
      util::MappedFile file(r.path);
      for (const auto& image : r.images) {
        std::string source = image.source + " " + devcode::to_string(image.format) + " at " + hex(image.offset);
        if (image.source == "__nv_relfatbin") {
          // Relocatable device code is input to nvlink, never loaded as is.
          v.notes.push_back(source + ": relocatable device code (-rdc) is linked, not loaded; skipped");
          continue;
        }
        if (image.offset > file.size() || image.size > file.size() - image.offset) {
          v.notes.push_back(source + ": outside the file; skipped");
          continue;
        }
        std::vector<const devcode::Entry*> entries = entries_in_range(r, image.offset, image.size);
        for (const auto& ec : r.embedded_cubins)
          if (ec.offset == image.offset)
            for (const auto& e : ec.entries) entries.push_back(&e);
        const char* ext = image.format == FileFormat::kCubin ? ".cubin"
                          : image.format == FileFormat::kPtx  ? ".ptx"
                                                              : ".fatbin";
        std::string path = util::join_path(temp_dir(plan, o),
                                           "entry-" + std::to_string(v.images.size() + 1) + ext);
        std::string_view bytes = file.view().substr(image.offset, image.size);
        if (image.format == FileFormat::kPtx) {
          // PTX must be NUL-terminated text for the driver.
          util::write_file(path, std::string(bytes.data(), strnlen(bytes.data(), bytes.size())));
        } else {
          util::write_file(path, bytes);
        }
        add_image(source, path, std::move(entries));
      }
      if (r.tvm_ffi_module) {
        std::string why;
        std::string lib = find_tvm_ffi_library(o, &why);
        v.module.checked = true;
        v.module.tvm_ffi_library = lib;
        if (lib.empty()) v.notes.push_back("libtvm_ffi not found (" + why + "); dlopen without it");
        json symbols = json::array();
        for (const auto& f : r.functions) {
          symbols.push_back(f.symbol);
          v.module.symbols.emplace_back(f.symbol, false);
        }
        Item item;
        item.id = static_cast<int>(plan.items.size()) + 1;
        item.file = fi;
        item.is_module = true;
        item.request = {{"id", item.id}, {"kind", "module"}, {"path", util::absolute_path(r.path)},
                        {"tvm_ffi_library", lib}, {"symbols", symbols}};
        plan.items.push_back(std::move(item));
      }
      if (v.images.empty() && !r.tvm_ffi_module)
        v.notes.push_back("no device code and no TVM FFI exports: nothing for the driver to load");
      break;
    }
    case FileFormat::kArchive:
      // Members are objects for a linker; nothing in an archive is loaded as is.
      v.notes.push_back("static archive: its members are linked, not loaded; nothing for the driver to load");
      break;
    case FileFormat::kUnknown:
      v.offline_valid = false;
      v.verdict = Verdict::kInvalid;
      v.message = "not device code (no cubin, fatbin, PTX or host ELF signature); not loaded";
      return;
  }
}

DriverInfo parse_driver_line(const json& d) {
  DriverInfo info;
  info.available = d.value("available", false);
  info.library = d.value("library", "");
  info.reason = d.value("reason", "");
  info.driver_version = d.value("driver_version", 0);
  info.device = d.value("device", 0);
  info.device_name = d.value("device_name", "");
  info.cc_major = d.value("cc_major", 0);
  info.cc_minor = d.value("cc_minor", 0);
  info.load_mode = d.value("load_mode", "unknown");
  info.library_api = d.value("library_api", false);
  info.kernel_enumeration = d.value("kernel_enumeration", false);
  return info;
}

void apply_image_result(ImageVerdict& img, const json& r) {
  img.error_log = r.value("error_log", "");
  img.info_log = r.value("info_log", "");
  img.failed_step = r.value("failed_step", "");
  img.result = r.value("result", "CUDA_SUCCESS");
  if (r.contains("kernel_count")) img.driver_kernel_count = r["kernel_count"].get<unsigned>();
  for (const auto& k : r.value("kernels", json::array())) {
    DriverKernel dk;
    dk.name = k.value("name", "");
    dk.resolved = k.value("resolved", false);
    dk.resolve_error = k.value("resolve_error", "");
    dk.enumerated = k.value("enumerated", false);
    if (k.contains("attributes")) {
      const json& a = k["attributes"];
      dk.attributes_read = true;
      KernelAttributes& t = dk.attributes;
      t.max_threads_per_block = a.value("max_threads_per_block", -1);
      t.shared_size_bytes = a.value("shared_size_bytes", -1);
      t.const_size_bytes = a.value("const_size_bytes", -1);
      t.local_size_bytes = a.value("local_size_bytes", -1);
      t.num_regs = a.value("num_regs", -1);
      t.ptx_version = a.value("ptx_version", -1);
      t.binary_version = a.value("binary_version", -1);
      t.max_dynamic_shared_bytes = a.value("max_dynamic_shared_bytes", -1);
      t.cluster_width = a.value("cluster_width", -1);
      t.cluster_height = a.value("cluster_height", -1);
      t.cluster_depth = a.value("cluster_depth", -1);
    }
    img.kernels.push_back(std::move(dk));
  }
}

// Driver figures against the offline parse, after the documented conversions.
std::vector<AttributeMismatch> compare_attributes(const devcode::Entry& e, const DriverKernel& dk) {
  std::vector<AttributeMismatch> out;
  if (!dk.attributes_read || e.kind != devcode::EntryKind::kElf) return out;  // PTX: no offline figures
  auto it = std::find_if(e.kernels.begin(), e.kernels.end(),
                         [&](const devcode::Kernel& k) { return k.name == dk.name; });
  if (it == e.kernels.end()) return out;
  const devcode::Kernel& k = *it;
  const KernelAttributes& a = dk.attributes;
  auto check = [&](const char* what, long long driver, long long offline) {
    if (driver >= 0 && driver != offline) out.push_back({dk.name, what, driver, offline});
  };
  if (k.registers) check("registers", a.num_regs, *k.registers);
  if (k.shared_bytes) {
    // sm_90+ ET_EXEC cubins carry a 1 KiB base in .nv.shared.<k> that the
    // driver does not count (cuda-formats.md §4.8).
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
  if (chosen)
    for (const auto& k : img.kernels) {
      auto m = compare_attributes(*entries[*chosen], k);
      img.mismatches.insert(img.mismatches.end(), m.begin(), m.end());
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

void apply_module_result(ModuleLoadVerdict& m, const json& r) {
  m.loaded = r.value("loaded", false);
  m.error = r.value("error", "");
  if (r.contains("symbols"))
    for (auto& [sym, ok] : m.symbols) ok = r["symbols"].value(sym, false);
}

// Reads the child's stdout lines into per-item results.
void collect(const std::string& out, std::optional<DriverInfo>& driver, std::map<int, json>& results) {
  for (const auto& line : util::split_lines(out)) {
    if (line.empty() || line[0] != '{') continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("driver")) {
      if (!driver) driver = parse_driver_line(j["driver"]);
    } else if (j.contains("item")) {
      int id = j["item"].get<int>();
      results[id] = std::move(j);
    }
  }
}

// The item and step of the child's last progress marker, if any.
std::optional<std::pair<int, std::string>> last_marker(const std::string& err) {
  std::optional<std::pair<int, std::string>> found;
  for (const auto& line : util::split_lines(err)) {
    if (!util::starts_with(line, kProbeMarker)) continue;
    size_t i = line.find(" item="), s = line.find(" step=");
    if (i == std::string::npos || s == std::string::npos) continue;
    found = std::make_pair(std::atoi(line.c_str() + i + 6), line.substr(s + 6));
  }
  return found;
}

std::string child_stderr_tail(const std::string& err) {
  std::vector<std::string> keep;
  for (const auto& line : util::split_lines(err))
    if (!line.empty() && !util::starts_with(line, kProbeMarker)) keep.push_back(line);
  if (keep.size() > 5) keep.erase(keep.begin(), keep.end() - 5);
  return util::join(keep, " | ");
}

std::string describe_death(const util::ProcessResult& pr, double timeout) {
  if (pr.timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", timeout);
    return std::string("driver did not return within ") + buf + " s";
  }
  if (pr.term_signal) return "driver crashed with " + util::signal_name(pr.term_signal);
  return "the driver probe exited with status " + std::to_string(pr.exit_code);
}

}  // namespace

std::vector<FileVerdict> validate_files(const std::vector<devcode::FileReport>& reports,
                                        const ValidateOptions& options) {
  Plan plan;
  plan.verdicts.resize(reports.size());
  for (size_t i = 0; i < reports.size(); ++i) plan_file(plan, i, reports[i], options);

  std::optional<DriverInfo> driver;
  std::map<int, json> results;
  // item id -> what killed the child while it was on that item
  std::map<int, std::string> deaths;
  std::string exe = options.self_exe.empty() ? self_executable() : options.self_exe;

  std::vector<const Item*> pending;
  for (const auto& item : plan.items) pending.push_back(&item);
  while (!pending.empty()) {
    json request = {{"device", options.device}, {"items", json::array()}};
    for (const Item* item : pending) request["items"].push_back(item->request);
    util::ProcessOptions po;
    po.stdin_data = request.dump();
    po.timeout_seconds = options.timeout_seconds;
    SPDLOG_DEBUG("driver probe: {} item(s) on device {}", pending.size(), options.device);
    util::ProcessResult pr = util::run_process({exe, kProbeCommand}, po);
    collect(pr.out, driver, results);
    if (pr.ok()) break;
    // The child died or hung. Blame the item it was working on, then start
    // a fresh child for the rest.
    auto marker = last_marker(pr.err);
    std::string death = describe_death(pr, options.timeout_seconds);
    std::string tail = child_stderr_tail(pr.err);
    std::vector<const Item*> rest;
    if (!marker || results.count(marker->first)) {
      // Died outside any item (cuInit, device setup, exit): every pending
      // item without a result shares the verdict, and retrying would only
      // die the same way.
      for (const Item* item : pending)
        if (!results.count(item->id))
          deaths[item->id] = death + (marker ? "" : " during driver initialisation") +
                             (tail.empty() ? "" : " (" + tail + ")");
      break;
    }
    deaths[marker->first] = death + " in " + marker->second + (tail.empty() ? "" : " (" + tail + ")");
    bool after = false;
    for (const Item* item : pending) {
      if (item->id == marker->first) after = true;
      else if (after && !results.count(item->id)) rest.push_back(item);
    }
    pending = std::move(rest);
  }

  DriverInfo info = driver.value_or(DriverInfo{});
  for (const Item& item : plan.items) {
    FileVerdict& v = plan.verdicts[item.file];
    v.driver = info;
    if (item.is_module) {
      if (auto d = deaths.find(item.id); d != deaths.end()) {
        v.module.error = d->second + " while loading the module (dlopen)";
      } else if (auto r = results.find(item.id); r != results.end()) {
        apply_module_result(v.module, r->second);
      } else {
        v.module.error = "the driver probe returned no result for the module";
      }
      continue;
    }
    ImageVerdict& img = v.images[item.image];
    if (auto d = deaths.find(item.id); d != deaths.end()) {
      img.crashed = true;
      img.problem = d->second;
      // "driver crashed with SIGSEGV while loading entry 2 (...) in cuLibraryLoadFromFile"
      std::string where = " while loading entry " + std::to_string(img.entry) +
                          (img.source == "file" ? "" : " (" + img.source + ")");
      size_t in = img.problem.find(" in ");
      size_t during = img.problem.find(" during ");
      size_t cut = std::min(in, during);
      img.problem.insert(cut == std::string::npos ? img.problem.size() : cut, where);
      continue;
    }
    auto r = results.find(item.id);
    if (r == results.end()) {
      img.problem = "entry " + std::to_string(img.entry) + ": the driver probe returned no result";
      continue;
    }
    if (r->second.contains("skipped")) {
      img.failed_step = "skipped";
      img.problem = r->second.value("skipped", "");
      continue;
    }
    apply_image_result(img, r->second);
    judge_image(img, item.entries, info);
  }

  for (size_t fi = 0; fi < plan.verdicts.size(); ++fi) {
    FileVerdict& v = plan.verdicts[fi];
    if (!v.offline_valid) {
      // Only reached the driver under the test hook; report what it did.
      for (const auto& img : v.images)
        v.message += "; the driver (loaded anyway): " + (img.valid ? std::string("accepted it") : img.problem);
      continue;
    }
    if (!driver && !plan.items.empty()) v.driver.reason = "the driver probe reported nothing";
    std::string first_problem;
    bool no_driver = false;
    size_t kernels = 0;
    for (const auto& img : v.images) {
      if (img.failed_step == "skipped") {
        no_driver = true;
        continue;
      }
      if (!img.valid && first_problem.empty()) first_problem = img.problem;
      kernels += img.driver_kernel_count.value_or(img.kernels.size());
    }
    if (first_problem.empty() && v.module.checked) {
      if (!v.module.error.empty()) {
        first_problem = "dlopen of the module failed: " + v.module.error;
      } else {
        std::vector<std::string> missing;
        for (const auto& [sym, ok] : v.module.symbols)
          if (!ok) missing.push_back(sym);
        if (!missing.empty()) first_problem = "module loaded but symbol(s) not found: " + util::join(missing, ", ");
      }
    }
    if (!first_problem.empty()) {
      v.verdict = Verdict::kInvalid;
      v.message = first_problem;
    } else if (no_driver) {
      v.verdict = Verdict::kNoDriver;
      // A driver that answered but has no usable device is "no device".
      v.message = std::string(v.driver.available ? "no device: " : "no driver: ") +
                  (v.driver.reason.empty() ? std::string("unavailable") : v.driver.reason);
    } else {
      v.verdict = Verdict::kValid;
      size_t mismatches = 0;
      for (const auto& img : v.images) mismatches += img.mismatches.size();
      v.message = "valid: " + std::to_string(kernels) + " kernel(s) in " + std::to_string(v.images.size()) +
                  " entr" + (v.images.size() == 1 ? "y" : "ies");
      if (!v.driver.device_name.empty())
        v.message += " on " + v.driver.device_name + " (sm_" + std::to_string(v.driver.cc_major) +
                     std::to_string(v.driver.cc_minor) + ")";
      if (v.module.checked)
        v.message += ", module loads, " + std::to_string(v.module.symbols.size()) + " function(s) resolved";
      if (mismatches) v.message += "; " + std::to_string(mismatches) + " attribute mismatch(es) with the offline parse";
    }
  }
  return std::move(plan.verdicts);
}

FileVerdict validate_file(const std::string& path, const devcode::FileReport& offline,
                          const ValidateOptions& options) {
  devcode::FileReport r = offline;
  if (r.path.empty()) r.path = path;
  return validate_files({r}, options).front();
}

int exit_code_for(const std::vector<FileVerdict>& verdicts) {
  bool no_driver = false;
  for (const auto& v : verdicts) {
    if (v.verdict == Verdict::kInvalid) return static_cast<int>(ExitCode::kInvalid);
    if (v.verdict == Verdict::kNoDriver) no_driver = true;
  }
  return no_driver ? static_cast<int>(ExitCode::kMissingTool) : 0;
}

json to_json(const FileVerdict& v) {
  json j;
  j["verdict"] = to_string(v.verdict);
  j["valid"] = v.verdict == Verdict::kValid;
  j["message"] = v.message;
  j["offline_valid"] = v.offline_valid;
  const DriverInfo& d = v.driver;
  j["library"] = d.library;
  j["available"] = d.available;
  if (!d.reason.empty()) j["reason"] = d.reason;
  j["driver_version"] = d.driver_version
                            ? json(std::to_string(d.driver_version / 1000) + "." +
                                   std::to_string(d.driver_version % 1000 / 10))
                            : json(nullptr);
  j["device"] = {{"ordinal", d.device},
                 {"name", d.device_name},
                 {"compute_capability", d.cc_major ? json(std::to_string(d.cc_major) + "." +
                                                          std::to_string(d.cc_minor))
                                                   : json(nullptr)}};
  j["load_mode"] = d.load_mode.empty() ? "unknown" : d.load_mode;
  j["kernel_enumeration"] = d.kernel_enumeration;
  json entries = json::array();
  for (const auto& img : v.images) {
    json e;
    e["entry"] = img.entry;
    e["source"] = img.source;
    e["offline_entry"] = img.offline_entry ? json(*img.offline_entry) : json(nullptr);
    e["offline_arch"] = img.offline_arch;
    e["offline_kernel_count"] = img.offline_kernel_count;
    e["kernel_count"] = img.driver_kernel_count ? json(*img.driver_kernel_count) : json(nullptr);
    e["valid"] = img.valid;
    e["crashed"] = img.crashed;
    e["failed_step"] = img.failed_step.empty() ? json(nullptr) : json(img.failed_step);
    e["result"] = img.result.empty() ? json(nullptr) : json(img.result);
    e["error_log"] = img.error_log;
    e["info_log"] = img.info_log;
    if (!img.problem.empty()) e["problem"] = img.problem;
    json kernels = json::array();
    for (const auto& k : img.kernels) {
      json kj = {{"name", k.name}, {"resolved", k.resolved}, {"enumerated", k.enumerated}};
      if (!k.resolve_error.empty()) kj["resolve_error"] = k.resolve_error;
      if (k.attributes_read) {
        const KernelAttributes& a = k.attributes;
        kj["attributes"] = {{"max_threads_per_block", a.max_threads_per_block},
                            {"shared_size_bytes", a.shared_size_bytes},
                            {"const_size_bytes", a.const_size_bytes},
                            {"local_size_bytes", a.local_size_bytes},
                            {"num_regs", a.num_regs},
                            {"ptx_version", a.ptx_version},
                            {"binary_version", a.binary_version},
                            {"max_dynamic_shared_size_bytes", a.max_dynamic_shared_bytes},
                            {"cluster_dims", {a.cluster_width, a.cluster_height, a.cluster_depth}}};
      }
      kernels.push_back(std::move(kj));
    }
    e["kernels"] = std::move(kernels);
    json mm = json::array();
    for (const auto& m : img.mismatches)
      mm.push_back({{"kernel", m.kernel}, {"attribute", m.attribute}, {"driver", m.driver}, {"offline", m.offline}});
    e["mismatches"] = std::move(mm);
    entries.push_back(std::move(e));
  }
  j["entries"] = std::move(entries);
  if (v.module.checked) {
    json syms = json::array();
    for (const auto& [sym, ok] : v.module.symbols) syms.push_back({{"symbol", sym}, {"resolved", ok}});
    j["module"] = {{"loaded", v.module.loaded},
                   {"error", v.module.error.empty() ? json(nullptr) : json(v.module.error)},
                   {"tvm_ffi_library", v.module.tvm_ffi_library},
                   {"functions", syms}};
  }
  j["notes"] = v.notes;
  return j;
}

std::string format_text(const FileVerdict& v) {
  std::string out;
  const DriverInfo& d = v.driver;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  if (!d.device_name.empty()) {
    line("  driver: " + d.device_name + " (device " + std::to_string(d.device) + ", sm_" +
         std::to_string(d.cc_major) + std::to_string(d.cc_minor) + "), CUDA " +
         std::to_string(d.driver_version / 1000) + "." + std::to_string(d.driver_version % 1000 / 10) + ", " +
         d.load_mode + " loading");
  }
  for (const auto& img : v.images) {
    std::string head = "  entry " + std::to_string(img.entry) + " (" + img.source + ")";
    if (!img.offline_arch.empty()) head += " as " + img.offline_arch;
    bool skipped = img.failed_step == "skipped";
    head += ": " + std::string(img.valid ? "loads" : img.crashed ? "CRASH" : skipped ? "not loaded" : "FAILS");
    if (skipped) head += " (no driver or device, see the verdict)";
    if (img.driver_kernel_count) head += ", " + std::to_string(*img.driver_kernel_count) + " kernel(s) in the driver";
    head += ", " + std::to_string(img.offline_kernel_count) + " kernel(s) listed offline";
    line(head);
    if (!img.valid && !img.problem.empty() && img.failed_step != "skipped") line("    " + img.problem);
    for (const auto& k : img.kernels) {
      if (!k.resolved) {
        line("    " + k.name + ": cuLibraryGetKernel " + k.resolve_error);
        continue;
      }
      const KernelAttributes& a = k.attributes;
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "    %-32s regs %3d  shared %6d  const %5d  local %5d  max threads %4d  sm %d  ptx %d",
                    k.name.c_str(), a.num_regs, a.shared_size_bytes, a.const_size_bytes, a.local_size_bytes,
                    a.max_threads_per_block, a.binary_version, a.ptx_version);
      line(buf);
    }
    for (const auto& m : img.mismatches)
      line("    mismatch: " + m.kernel + " " + m.attribute + ": driver " + std::to_string(m.driver) +
           ", offline " + std::to_string(m.offline));
    if (!img.error_log.empty())
      for (const auto& l : util::split_lines(img.error_log)) line("    log: " + l);
  }
  if (v.module.checked) {
    size_t ok = 0;
    for (const auto& s : v.module.symbols) ok += s.second;
    line("  module: " + std::string(v.module.loaded ? "dlopen ok" : "dlopen FAILED: " + v.module.error) + ", " +
         std::to_string(ok) + "/" + std::to_string(v.module.symbols.size()) + " function(s) resolved");
  }
  for (const auto& n : v.notes) line("  note: " + n);
  line("  verdict: " + v.message);
  return out;
}

}  // namespace tvmffi_jit::driver
