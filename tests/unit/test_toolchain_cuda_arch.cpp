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
