// <math.h> for NVRTC: the C++ header <cmath> (see that file).
#pragma once
#include <cmath>
