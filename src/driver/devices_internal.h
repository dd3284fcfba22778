// query_driver() for a given libcuda, bypassing the once-per-process cache
// (tests load the fake, the toolkit stub and a missing library in one process).
#pragma once

#include <string>

#include "tvmffi_jit/driver/devices.h"

namespace tvmffi_jit::driver {

DriverStatus query_driver_at(const std::string& library);

}  // namespace tvmffi_jit::driver
