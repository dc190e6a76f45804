// ktune_nvrtc.h: what nvcc's build of a cell has without any #include, given to NVRTC too.
//
// nvcc includes cuda_runtime.h, and through it the host's <math.h>, before every cell: M_PI,
// INFINITY and NAN are defined there, so a cell that uses them compiles for the static report.
// NVRTC has no host headers. Where nvcc is absent the run is NVRTC's build, and this file is
// pre-included (-include ktune_nvrtc.h) so that the same cell compiles there too (issue 36).
// The constants' values as glibc's <math.h> writes them; INFINITY and NAN as CUDA's
// math_constants.h does (device code: NVRTC has no __builtin_inff); each only where nothing
// defined it first.
#pragma once
#ifndef M_E
#define M_E        2.7182818284590452354   /* e */
#define M_LOG2E    1.4426950408889634074   /* log_2 e */
#define M_LOG10E   0.43429448190325182765  /* log_10 e */
#define M_LN2      0.69314718055994530942  /* log_e 2 */
#define M_LN10     2.30258509299404568402  /* log_e 10 */
#define M_PI       3.14159265358979323846  /* pi */
#define M_PI_2     1.57079632679489661923  /* pi/2 */
#define M_PI_4     0.78539816339744830962  /* pi/4 */
#define M_1_PI     0.31830988618379067154  /* 1/pi */
#define M_2_PI     0.63661977236758134308  /* 2/pi */
#define M_2_SQRTPI 1.12837916709551257390  /* 2/sqrt(pi) */
#define M_SQRT2    1.41421356237309504880  /* sqrt(2) */
#define M_SQRT1_2  0.70710678118654752440  /* 1/sqrt(2) */
#endif
#ifndef INFINITY
#define INFINITY (__int_as_float(0x7f800000U))
#endif
#ifndef NAN
#define NAN (__int_as_float(0x7fffffffU))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__int_as_float(0x7f800000U))
#endif
#ifndef HUGE_VAL
#define HUGE_VAL (__longlong_as_double(0x7ff0000000000000ULL))
#endif
