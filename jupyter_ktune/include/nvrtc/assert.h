// <assert.h> for NVRTC: the C++ header <cassert> (see that file).
#pragma once
#include <cassert>
