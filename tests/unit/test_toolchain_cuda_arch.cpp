// CUDA arch lists: parsing, nvcc flags, and where the list comes from.
#include <catch2/catch.hpp>

#include "tvmffi_jit/toolchain/cuda_arch.h"
#include "tvmffi_jit/util/error.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::toolchain;

namespace {
std::vector<std::string> texts(const std::vector<CudaArch>& archs) {
  std::vector<std::string> out;
  for (const auto& a : archs) out.push_back(a.text());
  return out;
}
}  // namespace

TEST_CASE("arch entries X.Y, X.Ya, X.Yf and +PTX parse with any separator", "[toolchain][cuda_arch]") {
  auto list = parse_arch_list(" 8.0, 9.0a;10.0f+ptx  12.1 ", "--arch");
  CHECK(texts(list) == std::vector<std::string>{"8.0", "9.0a", "10.0f+PTX", "12.1"});
  CHECK(list[1].sm() == "sm_90a");
  CHECK(list[1].compute() == "compute_90a");
  CHECK(list[2].sm() == "sm_100f");
  CHECK(list[3].sm() == "sm_121");
}

TEST_CASE("duplicate archs merge and +PTX sticks", "[toolchain][cuda_arch]") {
  CHECK(texts(parse_arch_list("9.0 8.0 9.0+PTX 8.0", "x")) == std::vector<std::string>{"9.0+PTX", "8.0"});
  std::vector<CudaArch> a = parse_arch_list("8.0", "x");
  merge_arch_lists(a, parse_arch_list("9.0 8.0", "y"));
  CHECK(texts(a) == std::vector<std::string>{"8.0", "9.0"});
}

TEST_CASE("malformed arch entries are usage errors naming the entry and origin", "[toolchain][cuda_arch]") {
  for (const char* bad : {"9", "90", "sm_90", "9.00", "9.0b", "9.0+SASS", "a.0", "100.0", "0.0", ".0", "9."}) {
    INFO(bad);
    try {
      parse_arch_list(bad, "TVM_FFI_CUDA_ARCH_LIST");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ExitCode::kUsage);
      CHECK(std::string(e.what()).rfind(std::string("TVM_FFI_CUDA_ARCH_LIST: bad CUDA architecture \"") + bad, 0) == 0);
    }
  }
  CHECK_THROWS_AS(parse_arch_list(" , ", "x"), Error);
}

TEST_CASE("try_parse_arch_list gives the list or the reason, for the caller to place", "[toolchain][cuda_arch]") {
  auto parsed = try_parse_arch_list("9.0 8.0 9.0+PTX");
  REQUIRE(parsed);
  CHECK(parsed->size() == 2);
  auto bad = try_parse_arch_list("8.0 90");
  REQUIRE_FALSE(bad);
  CHECK(bad.why().rfind("bad CUDA architecture \"90\": ", 0) == 0);
  auto empty = try_parse_arch_list(" ;, ");
  REQUIRE_FALSE(empty);
  CHECK(empty.why().rfind("empty CUDA architecture list: ", 0) == 0);
}

TEST_CASE("gencode flags: one per arch, plus compute PTX for +PTX", "[toolchain][cuda_arch]") {
  CHECK(gencode_flags(parse_arch_list("8.0 9.0a+PTX", "x")) ==
        std::vector<std::string>{"-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a",
                                 "-gencode=arch=compute_90a,code=compute_90a"});
}

TEST_CASE("arch resolution order: command line, manifest, environment, driver", "[toolchain][cuda_arch]") {
  int detect_calls = 0;
  DetectGpus detect = [&] {
    ++detect_calls;
    DetectedGpus g;
    g.available = true;
    g.capabilities = {{9, 0}, {8, 6}, {9, 0}};
    return g;
  };
  auto cli = parse_arch_list("10.0", "x");
  auto manifest = parse_arch_list("8.0", "x");
  CHECK(resolve_archs(cli, manifest, std::string("7.5"), detect).source == "--arch");
  CHECK(texts(resolve_archs({}, manifest, std::string("7.5"), detect).archs) == std::vector<std::string>{"8.0"});
  auto env = resolve_archs({}, {}, std::string("7.5 8.9"), detect);
  CHECK(env.source == "TVM_FFI_CUDA_ARCH_LIST");
  CHECK(texts(env.archs) == std::vector<std::string>{"7.5", "8.9"});
  CHECK(detect_calls == 0);
  auto gpus = resolve_archs({}, {}, std::string("  "), detect);
  CHECK(detect_calls == 1);
  CHECK(gpus.source == "driver");
  CHECK(texts(gpus.archs) == std::vector<std::string>{"9.0", "8.6"});
}

TEST_CASE("no arch anywhere is exit 4 with how to set one", "[toolchain][cuda_arch]") {
  DetectGpus no_driver = [] {
    DetectedGpus g;
    g.reason = "libcuda.so.1 not found";
    return g;
  };
  try {
    resolve_archs({}, {}, std::nullopt, no_driver);
    FAIL("resolved");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    std::string w = e.what();
    CHECK(w.find("libcuda.so.1 not found") != std::string::npos);
    CHECK(w.find("--arch") != std::string::npos);
    CHECK(w.find("TVM_FFI_CUDA_ARCH_LIST") != std::string::npos);
  }
  DetectGpus no_gpus = [] {
    DetectedGpus g;
    g.available = true;
    return g;
  };
  CHECK_THROWS_AS(resolve_archs({}, {}, std::nullopt, no_gpus), Error);
}

TEST_CASE("ROCm target lists take gfx ids with feature items and nothing else", "[toolchain][rocm]") {
  auto parsed = try_parse_rocm_arch_list("gfx90a, gfx942;gfx90a:xnack- gfx90a:sramecc+:xnack- gfx942");
  REQUIRE(parsed);
  CHECK(*parsed == std::vector<std::string>{"gfx90a", "gfx942", "gfx90a:xnack-", "gfx90a:sramecc+:xnack-"});
  for (const char* bad : {"9.0", "gfx", "gfxzz", "gfx90a:xnack", "gfx90a:", "sm_90", "gfx90a;rm -rf"}) {
    auto refused = try_parse_rocm_arch_list(bad);
    CHECK_FALSE(refused);
    CHECK(refused.why().find("invalid ROCm architecture") != std::string::npos);
  }
}

TEST_CASE("ROCm targets come from --arch, the manifest, the variable, then --offload-arch flags", "[toolchain][rocm]") {
  CHECK(resolve_rocm_archs({"gfx942"}, {"gfx90a"}, std::string("gfx1100"), {}).source == "--arch");
  CHECK(resolve_rocm_archs({}, {"gfx90a"}, std::string("gfx1100"), {}).archs == std::vector<std::string>{"gfx90a"});
  RocmArchResolution env = resolve_rocm_archs({}, {}, std::string(" gfx1100 gfx90a "), {});
  CHECK((env.source == "TVM_FFI_ROCM_ARCH_LIST" && env.archs == std::vector<std::string>{"gfx1100", "gfx90a"}));
  RocmArchResolution flag = resolve_rocm_archs({}, {}, std::nullopt, {"-O3", "--offload-arch=gfx90a"});
  CHECK((flag.source == "extra_cuda_cflags" && flag.archs.empty()));
  try {
    resolve_rocm_archs({}, {}, std::string("  "), {"-O3"});
    FAIL("no target list must be exit 4");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    for (const char* fix : {"TVM_FFI_ROCM_ARCH_LIST", "extra_cuda_cflags", "--arch gfx90a", "rocm_arch"})
      CHECK(std::string(e.what()).find(fix) != std::string::npos);
  }
}
