// <float.h> for NVRTC: the C++ header <cfloat> (see that file).
#pragma once
#include <cfloat>
