// scale(x, factor) -> x * clamp_factor(factor), exported through TVM FFI.
#include "scale.h"

double scale(double x, double factor) { return x * clamp_factor(factor); }
