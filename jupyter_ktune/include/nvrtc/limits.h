// <limits.h> for NVRTC: the C++ header <climits> (see that file).
#pragma once
#include <climits>
