// <stdint.h> for NVRTC: the C++ header <cstdint> (see that file).
#pragma once
#include <cstdint>
