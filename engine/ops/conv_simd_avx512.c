/* conv_simd_avx512.c -- conv_simd_kern.h compiled for AVX-512 (-mavx512f), as
 * CMakeLists.txt sets for this file: dl_conv_kernels_avx512. */
/* See LICENSE */
#if defined(__x86_64__) && defined(__GNUC__)
#include "ops/conv_simd_kern.h"
#endif
