/* conv_winograd_avx512.c -- conv_winograd_kern.h compiled for AVX-512 (-mavx512f), as
 * CMakeLists.txt sets for this file: dl_wino_tasks_avx512. */
/* See LICENSE */
#if defined(__x86_64__) && defined(__GNUC__)
#include "ops/conv_winograd_kern.h"
#endif
