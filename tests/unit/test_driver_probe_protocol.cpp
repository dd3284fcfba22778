// The parent/child protocol of driver validation (src/driver/probe_protocol.h):
// every message survives to_json/from_json, so the two ends cannot disagree
// on a key.
#include <catch2/catch.hpp>

#include "driver/probe_protocol.h"
#include "tvmffi_jit/driver/devices.h"

using namespace tvmffi_jit::driver;

TEST_CASE("a probe request survives the trip to the child", "[driver][protocol]") {
  ProbeRequest r;
  r.device = 3;
  ProbeItem image;
  image.id = 1;
  image.path = "/tmp/x/entry-1.fatbin";
  image.candidates = {{"sm_90", {"add", "_Z4smemPf"}}, {"compute_90", {"add"}}, {"", {}}};
  ProbeItem module;
  module.id = 2;
  module.kind = ProbeItem::Kind::kModule;
  module.path = "/tmp/m.so";
  module.tvm_ffi_library = "/opt/libtvm_ffi.so";
  module.symbols = {"__tvm_ffi_add", "__tvm_ffi_sub"};
  r.items = {image, module};
  ProbeRequest back = request_from_json(nlohmann::json::parse(to_json(r).dump()));
  CHECK(back.device == 3);
  REQUIRE(back.items.size() == 2);
  CHECK(back.items[0].kind == ProbeItem::Kind::kImage);
  CHECK(back.items[0].path == image.path);
  REQUIRE(back.items[0].candidates.size() == 3);
  CHECK(back.items[0].candidates[0].arch == "sm_90");
  CHECK(back.items[0].candidates[0].names == std::vector<std::string>{"add", "_Z4smemPf"});
  CHECK(back.items[1].kind == ProbeItem::Kind::kModule);
  CHECK(back.items[1].tvm_ffi_library == module.tvm_ffi_library);
  CHECK(back.items[1].symbols == module.symbols);
}

TEST_CASE("probe results and the driver line survive the trip back", "[driver][protocol]") {
  ProbeResult r;
  r.item = 7;
  r.error_log = "ptxas fatal";
  r.failed_step = "cuLibraryGetModule";
  r.result = "CUDA_ERROR_NO_BINARY_FOR_GPU";
  r.kernel_count = 2;
  DriverKernel k;
  k.name = "add";
  k.enumerated = true;
  k.resolved = true;
  k.attributes_read = true;
  k.attributes.num_regs = 12;
  k.attributes.shared_size_bytes = 0;
  k.attributes.cluster_width = 2;  // max_dynamic_shared_bytes stays -1: refused by the driver
  DriverKernel missing;
  missing.name = "gone";
  missing.resolve_error = "CUDA_ERROR_NOT_FOUND";
  r.kernels = {k, missing};
  ProbeResult back = result_from_json(nlohmann::json::parse(to_json(r).dump()));
  CHECK(back.item == 7);
  CHECK_FALSE(back.skipped);
  CHECK(back.error_log == r.error_log);
  CHECK(back.failed_step == r.failed_step);
  CHECK(back.result == r.result);
  CHECK(back.kernel_count == 2u);
  REQUIRE(back.kernels.size() == 2);
  CHECK(back.kernels[0].attributes.num_regs == 12);
  CHECK(back.kernels[0].attributes.shared_size_bytes == 0);
  CHECK(back.kernels[0].attributes.cluster_width == 2);
  CHECK(back.kernels[0].attributes.max_dynamic_shared_bytes == -1);
  CHECK_FALSE(back.kernels[1].attributes_read);
  CHECK(back.kernels[1].resolve_error == "CUDA_ERROR_NOT_FOUND");
  // A successful image has no failed step and reads as CUDA_SUCCESS.
  ProbeResult ok;
  ok.item = 1;
  CHECK(result_from_json(to_json(ok)).result == "CUDA_SUCCESS");
  // No device: only the reason.
  ProbeResult skipped;
  skipped.item = 4;
  skipped.skipped = "the driver reports no CUDA device";
  CHECK(result_from_json(to_json(skipped)).skipped == skipped.skipped);
  // A module.
  ProbeResult module;
  module.item = 5;
  module.loaded = true;
  module.symbols = {{"__tvm_ffi_add", true}, {"__tvm_ffi_gone", false}};
  CHECK(result_from_json(to_json(module)).symbols == module.symbols);

  DriverInfo d;
  d.available = true;
  d.library = "libcuda.so.1";
  d.driver_version = 13000;
  d.device = 1;
  d.device_name = "NVIDIA H200";
  d.cc_major = 9;
  d.load_mode = "lazy";
  d.library_api = d.kernel_enumeration = true;
  DriverInfo dback = driver_from_json(nlohmann::json::parse(probe_driver_json(d).dump()));
  CHECK(dback.device_name == d.device_name);
  CHECK(dback.driver_version == 13000);
  CHECK(dback.cc_major == 9);
  CHECK(dback.load_mode == "lazy");
  CHECK(dback.kernel_enumeration);
}

TEST_CASE("driver versions are written as CUDA versions", "[driver][protocol]") {
  CHECK(format_driver_version(13000) == "13.0");
  CHECK(format_driver_version(12040) == "12.4");
  CHECK(format_driver_version(11080) == "11.8");
}

TEST_CASE("names that are not UTF-8 cross the protocol byte for byte", "[driver][protocol]") {
  // A kernel name with one flipped bit ("a\xe4d"), a path in Latin-1: the
  // request is dumped strictly (as validate_run does) and must not throw.
  const std::string name = std::string("a\xe4") + "d";
  const std::string path = "/tmp/caf\xe9/k.cubin";
  ProbeRequest r;
  ProbeItem image;
  image.id = 1;
  image.path = path;
  image.candidates = {{"sm_90", {name, "ok"}}};
  r.items = {image};
  ProbeRequest back = request_from_json(nlohmann::json::parse(to_json(r).dump()));
  REQUIRE(back.items.size() == 1);
  CHECK(back.items[0].path == path);
  CHECK(back.items[0].candidates[0].names == std::vector<std::string>{name, "ok"});

  ProbeResult res;
  res.item = 1;
  res.error_log = "bad \xff byte";
  DriverKernel k;
  k.name = name;
  k.resolved = true;
  res.kernels = {k};
  res.symbols = {{name, true}, {"plain", false}};
  ProbeResult rb = result_from_json(nlohmann::json::parse(to_json(res).dump()));
  CHECK(rb.error_log == res.error_log);
  REQUIRE(rb.kernels.size() == 1);
  CHECK(rb.kernels[0].name == name);
  CHECK(rb.symbols == res.symbols);
}
