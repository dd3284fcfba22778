// Arch selection and query_driver(), without a GPU: the fake libcuda, the
// toolkit's stub and a missing library, each loaded through the uncached
// query_driver_at (query_driver itself opens one library per process).
#include <cstdlib>
#include <string>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "driver/arch_select.h"
#include "driver/devices_internal.h"

using namespace tvmffi_jit::driver;

TEST_CASE("arch strings parse into kind, major, minor and suffix", "[driver][arch]") {
  auto a = parse_arch("sm_90a");
  REQUIRE(a);
  CHECK_FALSE(a->ptx);
  CHECK(a->major == 9);
  CHECK(a->minor == 0);
  CHECK(a->suffix == 'a');
  auto b = parse_arch("compute_100f");
  REQUIRE(b);
  CHECK(b->ptx);
  CHECK(b->major == 10);
  CHECK(b->suffix == 'f');
  CHECK_FALSE(parse_arch("sm_9"));
  CHECK_FALSE(parse_arch("sm_90x"));
  CHECK_FALSE(parse_arch("gfx90a"));
}

TEST_CASE("compatibility follows the documented SASS/PTX rules", "[driver][arch]") {
  CHECK(runs_on(*parse_arch("sm_80"), 8, 6));
  CHECK_FALSE(runs_on(*parse_arch("sm_80"), 9, 0));       // SASS never crosses a major
  CHECK_FALSE(runs_on(*parse_arch("sm_86"), 8, 0));
  CHECK(runs_on(*parse_arch("sm_90a"), 9, 0));
  CHECK_FALSE(runs_on(*parse_arch("sm_100a"), 10, 3));    // 'a': exactly that SM
  CHECK(runs_on(*parse_arch("sm_100f"), 10, 3));          // 'f': the family
  CHECK(runs_on(*parse_arch("compute_80"), 9, 0));        // PTX JITs forward
  CHECK_FALSE(runs_on(*parse_arch("compute_100"), 9, 0));
  CHECK_FALSE(runs_on(*parse_arch("compute_90a"), 10, 0));
}

TEST_CASE("the driver's pick: exact SASS, then newest compatible SASS, then PTX", "[driver][arch]") {
  CHECK(select_image({"compute_90", "sm_90a", "compute_90a"}, 9, 0) == 1u);
  CHECK(select_image({"sm_80", "sm_86", "compute_80"}, 8, 9) == 1u);
  CHECK(select_image({"sm_80", "compute_80"}, 9, 0) == 1u);
  CHECK(select_image({"sm_100a", "compute_100a"}, 9, 0) == std::nullopt);
  CHECK(select_image({"compute_75", "compute_89"}, 9, 0) == 1u);
}

// --- query_driver ------------------------------------------------------------

namespace {
const std::string kFakeLib = std::string(TVMFFI_JIT_BINARY_DIR) + "/tests/fake_libcuda/libfakecuda.so";
const std::string kStubLib = "/usr/local/cuda/lib64/stubs/libcuda.so";
}  // namespace

TEST_CASE("query_driver lists the devices a driver reports", "[driver][devices]") {
  setenv("FAKE_CUDA_MODE", "ok", 1);
  DriverStatus s = query_driver_at(kFakeLib);
  CHECK(s.available);
  CHECK(s.library == kFakeLib);
  CHECK(s.driver_version == 13000);
  REQUIRE(s.gpus.size() == 1);
  CHECK(s.gpus[0].ordinal == 0);
  CHECK(s.gpus[0].name == "Fake GPU (tvmffi-jit tests)");
  CHECK(s.gpus[0].cc_major == 9);
  CHECK(s.gpus[0].cc_minor == 0);
  CHECK(s.reason.empty());
  unsetenv("FAKE_CUDA_MODE");
}

TEST_CASE("a driver without devices is available with no GPUs and a reason", "[driver][devices]") {
  setenv("FAKE_CUDA_MODE", "no_device", 1);
  DriverStatus s = query_driver_at(kFakeLib);
  CHECK(s.available);
  CHECK(s.gpus.empty());
  CHECK(s.reason.find("CUDA_ERROR_NO_DEVICE") != std::string::npos);
  unsetenv("FAKE_CUDA_MODE");
}

TEST_CASE("a missing libcuda is not available and says why", "[driver][devices]") {
  DriverStatus s = query_driver_at("/nonexistent/libcuda.so.1");
  CHECK_FALSE(s.available);
  CHECK(s.reason.find("could not be loaded") != std::string::npos);
}

TEST_CASE("the CUDA toolkit's stub libcuda counts as no driver", "[driver][devices]") {
  if (access(kStubLib.c_str(), R_OK) != 0) {
    WARN("no CUDA toolkit stub at " << kStubLib << "; nothing to test");
    return;
  }
  DriverStatus s = query_driver_at(kStubLib);
  CHECK_FALSE(s.available);
  CHECK(s.reason.find("CUDA_ERROR_STUB_LIBRARY") != std::string::npos);
}
