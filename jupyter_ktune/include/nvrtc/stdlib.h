// <stdlib.h> for NVRTC: the C++ header <cstdlib> (see that file).
#pragma once
#include <cstdlib>
