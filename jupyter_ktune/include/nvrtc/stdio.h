// <stdio.h> for NVRTC: see <cstdio>.
#pragma once
#include <cstdio>
