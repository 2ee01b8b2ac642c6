/* conv_winograd_avx2.c -- conv_winograd_kern.h compiled for AVX2 with FMA (-mavx2 -mfma), as
 * CMakeLists.txt sets for this file: dl_wino_tasks_avx2. */
/* See LICENSE */
#if defined(__x86_64__) && defined(__GNUC__)
#include "ops/conv_winograd_kern.h"
#endif
