// A header the module includes: touching or editing it must rebuild the
// module (the depfile lists it), nothing else should.
#pragma once

inline constexpr double kMaxFactor = 1000.0;

inline double clamp_factor(double f) { return f > kMaxFactor ? kMaxFactor : (f < -kMaxFactor ? -kMaxFactor : f); }
