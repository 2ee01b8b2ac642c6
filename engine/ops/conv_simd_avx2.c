/* conv_simd_avx2.c -- conv_simd_kern.h compiled for AVX2 with FMA (-mavx2 -mfma), as
 * CMakeLists.txt sets for this file: dl_conv_kernels_avx2. */
/* See LICENSE */
#if defined(__x86_64__) && defined(__GNUC__)
#include "ops/conv_simd_kern.h"
#endif
