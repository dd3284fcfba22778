// What unit tests plan and build with, without a compiler or a GPU:
//   WritingRunner: a compile::CommandRunner in which every compile and link
//     "succeeds": it writes the -o output, an empty depfile for -MF (or
//     nvcc's --dependency-output), and an empty list of what the linker read
//     for --dependency-file, so cached builds record and publish;
//   fake_toolchain(): compilers and tvm-ffi at fixed paths (CUDA optional);
//   no_gpus(): plan options whose GPU detection finds no driver;
//   Project: a temp folder with a few sources, modules as manifests over
//     them, built by cached_build() through the storage a test gives.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/compile/cached_build.h"
#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/compile/runner.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::testing {

class WritingRunner : public compile::CommandRunner {
 public:
  std::atomic<int> runs{0};
  util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) override {
    ++runs;
    std::string out, dep, linked;
    for (size_t i = 0; i < argv.size(); ++i) {
      if (argv[i] == "-o" && i + 1 < argv.size()) out = argv[i + 1];
      if ((argv[i] == "-MF" || argv[i] == "--dependency-output") && i + 1 < argv.size()) dep = argv[i + 1];
      for (const char* p : {"-Wl,--dependency-file=", "--dependency-file="})
        if (util::starts_with(argv[i], p)) linked = argv[i].substr(std::string(p).size());
    }
    if (!out.empty()) util::write_file(util::join_path(options.cwd, out), "built\n");
    if (!dep.empty()) util::write_file(util::join_path(options.cwd, dep), out + ":\n");
    if (!linked.empty()) util::write_file(util::join_path(options.cwd, linked), out + ":\n");
    util::ProcessResult r;
    r.exit_code = 0;
    return r;
  }
};

inline toolchain::Toolchain fake_toolchain(bool with_cuda = false) {
  toolchain::Toolchain tc;
  tc.host.cxx = "/usr/bin/c++";
  tc.host.cc = "/usr/bin/cc";
  if (with_cuda) tc.cuda = toolchain::CudaToolkit{"/opt/cuda", "/opt/cuda/bin/nvcc", "CUDA_HOME"};
  tc.tvm_ffi = toolchain::TvmFfiLocation{"/tvm/include", "/tvm/include", "/tvm/lib", "test"};
  return tc;
}

inline compile::PlanOptions no_gpus() {
  compile::PlanOptions o;
  o.detect_gpus = [] {
    toolchain::DetectedGpus g;
    g.reason = "no driver in unit tests";
    return g;
  };
  return o;
}

// A project folder with a few sources; each module a manifest over some.
struct Project {
  util::TempDir dir;
  toolchain::Toolchain tc = fake_toolchain();
  Project() {
    for (const char* f : {"a.cc", "b.cc", "c.cc", "d.cc"})
      util::write_file(util::join_path(dir.path(), f), std::string("int ") + f[0] + "() { return 1; }\n");
  }
  std::string path(const std::string& f) const { return util::join_path(dir.path(), f); }
  compile::Manifest manifest(const std::string& name, const std::string& sources) const {
    return compile::parse_manifest_text(R"({"name": ")" + name + R"(", "sources": [)" + sources + "]}",
                                        path(name + ".json"), dir.path());
  }
  compile::CachedBuildOptions options(cache::EntryStorage& storage, compile::CommandRunner& runner) const {
    compile::CachedBuildOptions o;
    o.storage = &storage;
    o.base_dir = dir.path();
    o.environment = compile::relevant_environment([](const std::string&) { return std::optional<std::string>(); });
    o.exec.runner = &runner;
    return o;
  }
  compile::CachedBuildResult build(const compile::Manifest& m, cache::EntryStorage& storage,
                                   compile::CommandRunner& runner) const {
    return compile::cached_build(compile::make_plan(m, tc, no_gpus()), m, tc, options(storage, runner));
  }
};

}  // namespace tvmffi_jit::testing
