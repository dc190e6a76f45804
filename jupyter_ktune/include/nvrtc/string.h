// <string.h> for NVRTC: the C++ header <cstring> (see that file).
#pragma once
#include <cstring>
