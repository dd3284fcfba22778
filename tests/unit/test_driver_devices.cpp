// query_driver() and arch selection, without a GPU. query_driver opens the
// driver once per process, so only one library can be tested per process:
// these tests use the fake (the stub and "no library" cases run as
// integration tests, each in its own process).
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "driver/arch_select.h"

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
