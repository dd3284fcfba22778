// Driver validation, step 1: from the offline reports, the verdict skeletons
// and the child's work items (images extracted to temporary files).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "validate_internal.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::driver {

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The offline entries of each image of a host ELF file, found by offset
// without a pass over every entry per image (a crafted file has tens of
// thousands of containers): the file's entries sorted by header offset, and
// the embedded cubins' entries by blob offset.
class EntriesByOffset {
 public:
  explicit EntriesByOffset(const devcode::FileReport& r) {
    for (const auto& e : r.entries) sorted_.push_back(&e);
    std::stable_sort(sorted_.begin(), sorted_.end(), [](const devcode::Entry* a, const devcode::Entry* b) {
      return a->header_offset < b->header_offset;
    });
    for (const auto& c : r.embedded_cubins)
      for (const auto& e : c.entries) embedded_[c.offset].push_back(&e);
  }
  // Entries inside [offset, offset + size), in file order, then those of an
  // embedded cubin that starts at `offset`.
  std::vector<const devcode::Entry*> in_range(uint64_t offset, uint64_t size) const {
    auto first = std::lower_bound(sorted_.begin(), sorted_.end(), offset,
                                  [](const devcode::Entry* e, uint64_t o) { return e->header_offset < o; });
    std::vector<const devcode::Entry*> out;
    for (auto it = first; it != sorted_.end() && (*it)->header_offset - offset < size; ++it) out.push_back(*it);
    std::sort(out.begin(), out.end(), std::less<const devcode::Entry*>());  // the report's order
    if (auto it = embedded_.find(offset); it != embedded_.end()) out.insert(out.end(), it->second.begin(), it->second.end());
    return out;
  }

 private:
  std::vector<const devcode::Entry*> sorted_;
  std::map<uint64_t, std::vector<const devcode::Entry*>> embedded_;
};

bool loadable(const devcode::Entry& e) {
  return (e.kind == devcode::EntryKind::kElf || e.kind == devcode::EntryKind::kPtx) && e.error.empty();
}

std::vector<ProbeCandidate> candidates_of(const std::vector<const devcode::Entry*>& entries) {
  std::vector<ProbeCandidate> out;
  for (const auto* e : entries) {
    ProbeCandidate c;
    c.arch = loadable(*e) ? e->arch : std::string();
    for (const auto& k : e->kernels) c.names.push_back(k.name);
    out.push_back(std::move(c));
  }
  return out;
}

std::string temp_dir(Plan& plan, const ValidateOptions& o) {
  if (!plan.temp) plan.temp.emplace(o.temp_parent, "tvmffi-jit-validate-");
  return plan.temp->path();
}

Expected<std::string> find_tvm_ffi_library(const ValidateOptions& o) {
  if (!o.tvm_ffi_library.empty()) return o.tvm_ffi_library;
  auto loc = toolchain::find_tvm_ffi(o.tvm_ffi_search);
  if (!loc) return Unexpected{loc.error()};
  return util::join_path(loc->lib_dir, "libtvm_ffi.so");
}

// A file whose offline check failed is never handed to the driver (truncated
// cubins crash it), unless the ungated test hook asks for a stand-alone image
// to be loaded anyway. Marks the verdict invalid; true: load it all the same.
bool load_despite_offline_failure(FileVerdict& v, const devcode::FileReport& r, const ValidateOptions& o) {
  v.offline_valid = false;
  v.verdict = Verdict::kInvalid;
  v.message = "offline structure check failed: " + r.error;
  bool stand_alone = r.format == devcode::FileFormat::kCubin || r.format == devcode::FileFormat::kFatbin ||
                     r.format == devcode::FileFormat::kPtx;
  if (!o.ungated || !stand_alone) return false;
  // Test hook (docs/driver.md): load it anyway, to exercise crash isolation
  // on a real driver. The verdict stays invalid whatever the driver says.
  v.notes.push_back(std::string(kUngatedEnv) + " is set: loaded although the offline check failed");
  return true;
}

// One image for the child to load: its verdict and its work item.
void add_image(Plan& plan, size_t fi, FileVerdict& v, const std::string& source, const std::string& path,
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
  item.request.id = static_cast<int>(plan.items.size()) + 1;
  item.request.kind = ProbeItem::Kind::kImage;
  item.request.path = path;
  item.request.candidates = candidates_of(entries);
  item.file = fi;
  item.image = v.images.size();
  item.entries = std::move(entries);
  v.images.push_back(std::move(img));
  plan.items.push_back(std::move(item));
}

// A cubin, fatbin or PTX file: one image, the file itself.
void plan_stand_alone(Plan& plan, size_t fi, FileVerdict& v, const devcode::FileReport& r) {
  std::vector<const devcode::Entry*> entries;
  for (const auto& e : r.entries) entries.push_back(&e);
  add_image(plan, fi, v, "file", util::absolute_path(r.path), std::move(entries));
}

// Each image embedded in a host ELF file, extracted to a temporary file (the
// ones the driver would never load are noted and skipped).
void plan_embedded_images(Plan& plan, size_t fi, FileVerdict& v, const devcode::FileReport& r,
                          const ValidateOptions& o) {
  using devcode::FileFormat;
  util::MappedFile file(r.path);
  EntriesByOffset by_offset(r);
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
    std::vector<const devcode::Entry*> entries = by_offset.in_range(image.offset, image.size);
    const char* ext = image.format == FileFormat::kCubin ? ".cubin"
                      : image.format == FileFormat::kPtx  ? ".ptx"
                                                          : ".fatbin";
    std::string path = util::join_path(temp_dir(plan, o), "entry-" + std::to_string(v.images.size() + 1) + ext);
    std::string_view bytes = file.view().substr(image.offset, image.size);
    if (image.format == FileFormat::kPtx) {
      // PTX must be NUL-terminated text for the driver.
      util::write_file(path, std::string(bytes.data(), strnlen(bytes.data(), bytes.size())));
    } else {
      util::write_file(path, bytes);
    }
    add_image(plan, fi, v, source, path, std::move(entries));
  }
}

// A TVM FFI module: one item that dlopens it and looks up its exports.
void plan_module_load(Plan& plan, size_t fi, FileVerdict& v, const devcode::FileReport& r, const ValidateOptions& o) {
  auto found = find_tvm_ffi_library(o);
  const std::string lib = found.value_or("");
  v.module.checked = true;
  v.module.tvm_ffi_library = lib;
  if (!found) v.notes.push_back("libtvm_ffi not found (" + found.error() + "); dlopen without it");
  Item item;
  item.request.id = static_cast<int>(plan.items.size()) + 1;
  item.request.kind = ProbeItem::Kind::kModule;
  item.request.path = util::absolute_path(r.path);
  item.request.tvm_ffi_library = lib;
  for (const auto& f : r.functions) {
    item.request.symbols.push_back(f.symbol);
    v.module.symbols.emplace_back(f.symbol, false);
  }
  item.file = fi;
  plan.items.push_back(std::move(item));
}

void plan_host_elf(Plan& plan, size_t fi, FileVerdict& v, const devcode::FileReport& r, const ValidateOptions& o) {
  plan_embedded_images(plan, fi, v, r, o);
  if (r.tvm_ffi_module) plan_module_load(plan, fi, v, r, o);
  if (v.images.empty() && !r.tvm_ffi_module)
    v.notes.push_back("no device code and no TVM FFI exports: nothing for the driver to load");
}

void plan_file(Plan& plan, size_t fi, const devcode::FileReport& r, const ValidateOptions& o) {
  FileVerdict& v = plan.verdicts[fi];
  v.path = r.path;
  if (!r.ok() && !load_despite_offline_failure(v, r, o)) return;
  using devcode::FileFormat;
  switch (r.format) {
    case FileFormat::kCubin:
    case FileFormat::kFatbin:
    case FileFormat::kPtx:
      plan_stand_alone(plan, fi, v, r);
      break;
    case FileFormat::kHostElf:
      plan_host_elf(plan, fi, v, r, o);
      break;
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

}  // namespace

std::vector<std::string> archs_of(const std::vector<const devcode::Entry*>& entries) {
  std::vector<std::string> out;
  for (const auto* e : entries) out.push_back(loadable(*e) ? e->arch : std::string());
  return out;
}

Plan plan_validation(const std::vector<devcode::FileReport>& reports, const ValidateOptions& options) {
  Plan plan;
  plan.verdicts.resize(reports.size());
  for (size_t i = 0; i < reports.size(); ++i) plan_file(plan, i, reports[i], options);
  return plan;
}

}  // namespace tvmffi_jit::driver
