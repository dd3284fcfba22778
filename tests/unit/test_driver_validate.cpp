// Driver validation against the fake libcuda (tests/fake_libcuda): every
// verdict path, and that a crash or a hang in the driver is a verdict rather
// than the death of the caller.
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/driver/validate.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;

namespace {

const std::string kFake = std::string(TVMFFI_JIT_BINARY_DIR) + "/tests/fake_libcuda/libfakecuda.so";
const std::string kTool = std::string(TVMFFI_JIT_BINARY_DIR) + "/tvmffi-jit";
const std::string kCubin = std::string(TVMFFI_JIT_ORACLES_DIR) + "/a90.cubin";

// Sets FAKE_CUDA_MODE (and the fake driver) for the children of one test.
struct FakeDriver {
  explicit FakeDriver(const char* mode, const char* fail_on = nullptr) {
    setenv("TVMFFI_JIT_LIBCUDA", kFake.c_str(), 1);
    setenv("FAKE_CUDA_MODE", mode, 1);
    if (fail_on) setenv("FAKE_CUDA_FAIL_ON_LOAD", fail_on, 1);
    else unsetenv("FAKE_CUDA_FAIL_ON_LOAD");
  }
  ~FakeDriver() {
    unsetenv("FAKE_CUDA_MODE");
    unsetenv("FAKE_CUDA_FAIL_ON_LOAD");
  }
};

driver::ValidateOptions options(double timeout = 20) {
  driver::ValidateOptions o;
  o.self_exe = kTool;
  o.timeout_seconds = timeout;
  return o;
}

driver::FileVerdict validate(const std::string& path, double timeout = 20) {
  devcode::FileReport r = devcode::inspect_file(path);
  return driver::validate_file(path, r, options(timeout));
}

}  // namespace

TEST_CASE("a cubin whose kernels the driver lists and resolves is valid", "[driver][validate]") {
  FakeDriver fake("ok");
  auto v = validate(kCubin);
  INFO(v.message);
  CHECK(v.verdict == driver::Verdict::kValid);
  REQUIRE(v.images.size() == 1);
  CHECK(v.images[0].driver_kernel_count == 4u);
  CHECK(v.images[0].offline_kernel_count == 4);
  CHECK(v.driver.device_name == "Fake GPU (tvmffi-jit tests)");
  CHECK(v.driver.cc_major == 9);
  for (const auto& k : v.images[0].kernels) CHECK(k.resolved);
  CHECK(driver::exit_code_for({v}) == 0);
}

TEST_CASE("driver attributes that disagree with the offline parse are flagged, documented offsets are not",
          "[driver][validate]") {
  FakeDriver fake("ok");
  // The fake reports 0 registers and 0 shared bytes for every kernel; the
  // cubin's add uses 12 registers and _Z4smemPf 5384-1024 shared bytes.
  auto v = validate(kCubin);
  REQUIRE(v.images.size() == 1);
  bool regs = false, shared = false;
  for (const auto& m : v.images[0].mismatches) {
    if (m.kernel == "add" && m.attribute == "registers") regs = (m.offline == 12 && m.driver == 0);
    if (m.kernel == "_Z4smemPf" && m.attribute == "shared") shared = (m.offline == 4360);
  }
  CHECK(regs);
  CHECK(shared);
  // Mismatches are reported, not a verdict.
  CHECK(v.verdict == driver::Verdict::kValid);
}

TEST_CASE("a load that succeeds with zero kernels and an error log is invalid, naming the CUresult",
          "[driver][validate]") {
  FakeDriver fake("zero_kernels");
  auto v = validate(kCubin);
  CHECK(v.verdict == driver::Verdict::kInvalid);
  REQUIRE(v.images.size() == 1);
  CHECK(v.images[0].result == "CUDA_ERROR_INVALID_PTX");
  CHECK(v.images[0].failed_step == "cuLibraryGetModule");
  CHECK(v.images[0].error_log.find("retx") != std::string::npos);
  CHECK(v.message.find("CUDA_ERROR_INVALID_PTX") != std::string::npos);
  CHECK(driver::exit_code_for({v}) == 3);
}

TEST_CASE("an error from cuLibraryGetKernel makes the file invalid", "[driver][validate]") {
  FakeDriver fake("kernel_error");
  auto v = validate(kCubin);
  CHECK(v.verdict == driver::Verdict::kInvalid);
  CHECK(v.message.find("CUDA_ERROR_NO_BINARY_FOR_GPU") != std::string::npos);
}

TEST_CASE("a driver crash during the load is a verdict naming the signal, the entry and the step",
          "[driver][validate]") {
  FakeDriver fake("crash");
  auto v = validate(kCubin);
  CHECK(v.verdict == driver::Verdict::kInvalid);
  REQUIRE(v.images.size() == 1);
  CHECK(v.images[0].crashed);
  CHECK(v.message.find("driver crashed with SIGSEGV while loading entry 1") != std::string::npos);
  CHECK(v.message.find("cuLibraryLoadFromFile") != std::string::npos);
}

TEST_CASE("a driver that never returns is stopped after the timeout and reported", "[driver][validate]") {
  FakeDriver fake("hang");
  auto v = validate(kCubin, 1.0);
  CHECK(v.verdict == driver::Verdict::kInvalid);
  CHECK(v.message.find("driver did not return within 1 s while loading entry 1") != std::string::npos);
}

TEST_CASE("after a crash the remaining files are validated in a fresh child", "[driver][validate]") {
  FakeDriver fake("crash", "2");  // only the second load crashes
  std::vector<devcode::FileReport> reports = {devcode::inspect_file(kCubin), devcode::inspect_file(kCubin),
                                              devcode::inspect_file(kCubin)};
  auto vs = driver::validate_files(reports, options());
  REQUIRE(vs.size() == 3);
  CHECK(vs[0].verdict == driver::Verdict::kValid);
  CHECK(vs[1].verdict == driver::Verdict::kInvalid);
  CHECK(vs[1].images[0].crashed);
  // The fresh child's first load is load 1 again, so it does not crash.
  CHECK(vs[2].verdict == driver::Verdict::kValid);
}

TEST_CASE("an offline-invalid file never reaches the driver", "[driver][validate]") {
  FakeDriver fake("crash");
  util::TempDir dir;
  std::string bytes = util::read_file(kCubin);
  std::string truncated = dir.path() + "/truncated.cubin";
  util::write_file(truncated, bytes.substr(0, 8000));
  auto v = validate(truncated);
  CHECK(v.verdict == driver::Verdict::kInvalid);
  CHECK_FALSE(v.offline_valid);
  CHECK(v.images.empty());
  CHECK(v.message.find("offline") != std::string::npos);
}

TEST_CASE("a 12.0 driver without kernel enumeration resolves the offline names", "[driver][validate]") {
  FakeDriver fake("old_driver");
  auto v = validate(kCubin);
  INFO(v.message);
  CHECK(v.verdict == driver::Verdict::kValid);
  REQUIRE(v.images.size() == 1);
  CHECK_FALSE(v.images[0].driver_kernel_count.has_value());
  CHECK(v.images[0].kernels.size() == 4);
}

TEST_CASE("no device is 'no driver', exit 4", "[driver][validate]") {
  FakeDriver fake("no_device");
  auto v = validate(kCubin);
  CHECK(v.verdict == driver::Verdict::kNoDriver);
  CHECK(v.message.find("CUDA_ERROR_NO_DEVICE") != std::string::npos);
  CHECK(driver::exit_code_for({v}) == 4);
}

TEST_CASE("the JSON driver object carries the verdict, device and per-kernel attributes", "[driver][validate]") {
  FakeDriver fake("ok");
  auto j = driver::to_json(validate(kCubin));
  CHECK(j["verdict"] == "valid");
  CHECK(j["driver_version"] == "13.0");
  CHECK(j["device"]["compute_capability"] == "9.0");
  CHECK(j["load_mode"] == "lazy");
  REQUIRE(j["entries"].size() == 1);
  CHECK(j["entries"][0]["kernels"].size() == 4);
  CHECK(j["entries"][0]["kernels"][0]["attributes"].contains("num_regs"));
}
