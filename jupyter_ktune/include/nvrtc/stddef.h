// <stddef.h> for NVRTC: the C++ header <cstddef> (see that file).
#pragma once
#include <cstddef>
