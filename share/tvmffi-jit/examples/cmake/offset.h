// Included by offset.cc: editing it must rebuild the module.
#pragma once

#include <cstdint>

inline constexpr int64_t kOffset = 42;
