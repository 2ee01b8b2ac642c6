/* cpu.c -- the CPU identification behind dl_cpu_info (cpu.h).
 *
 * CPUID gives the vendor (leaf 0), family and model (leaf 1) and the brand string
 * (leaves 0x80000002-4); the SIMD flags come from the compiler's feature test, which
 * also checks that the OS saves the wider registers (XGETBV), so a flag set here is one
 * a kernel may use. Off x86 everything is empty and no flag is set.
 */
/* See LICENSE */
#include "core/cpu.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define DL_X86 1
#else
#define DL_X86 0
#endif

#define DL_CPU_FLAG_NAME_(id, name) name,
const char *const dl_cpu_flag_names[DL_CPU_NFLAGS] = {DL_CPU_FLAGS(DL_CPU_FLAG_NAME_)};
#undef DL_CPU_FLAG_NAME_

static dl_cpu cpu;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

#if DL_X86
/* the brand string without its padding spaces */
static void brand(char out[49]) {
  unsigned r[12] = {0}, a, b, c, d;
  out[0] = '\0';
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000004u) return;
  for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
  memcpy(out, r, 48);
  out[48] = '\0';
  size_t n = strlen(out), s = 0;
  while (n > 0 && out[n - 1] == ' ') out[--n] = '\0';
  while (out[s] == ' ') s++;
  memmove(out, out + s, n - s + 1);
}

static void probe_x86(void) {
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    memcpy(cpu.vendor, &b, 4);
    memcpy(cpu.vendor + 4, &d, 4);
    memcpy(cpu.vendor + 8, &c, 4);
    cpu.vendor[12] = '\0';
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    int fam = (int)((a >> 8) & 0xf), mod = (int)((a >> 4) & 0xf);
    if (fam == 0xf) fam += (int)((a >> 20) & 0xff);
    if (fam == 0x6 || fam >= 0xf) mod += (int)((a >> 16) & 0xf) << 4;
    cpu.family = fam;
    cpu.model = mod;
  }
  brand(cpu.model_name);
  __builtin_cpu_init();
  /* __builtin_cpu_supports takes a string literal only: one line a flag */
  unsigned f = 0;
  f |= (unsigned)(__builtin_cpu_supports("sse4.2") != 0) << DL_CPU_SSE4_2;
  f |= (unsigned)(__builtin_cpu_supports("avx") != 0) << DL_CPU_AVX;
  f |= (unsigned)(__builtin_cpu_supports("avx2") != 0) << DL_CPU_AVX2;
  f |= (unsigned)(__builtin_cpu_supports("fma") != 0) << DL_CPU_FMA;
  f |= (unsigned)(__builtin_cpu_supports("avx512f") != 0) << DL_CPU_AVX512F;
  f |= (unsigned)(__builtin_cpu_supports("avx512bw") != 0) << DL_CPU_AVX512BW;
  f |= (unsigned)(__builtin_cpu_supports("avx512vl") != 0) << DL_CPU_AVX512VL;
  f |= (unsigned)(__builtin_cpu_supports("avx512dq") != 0) << DL_CPU_AVX512DQ;
  f |= (unsigned)(__builtin_cpu_supports("avx512vnni") != 0) << DL_CPU_AVX512VNNI;
  f |= (unsigned)(__builtin_cpu_supports("avx512bf16") != 0) << DL_CPU_AVX512BF16;
  cpu.flags = f;
}
#endif

static void probe(void) {
#if DL_X86
  probe_x86();
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  cpu.cores = n > 0 && n < (1L << 20) ? (int)n : 1;
}

static double thread_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double dl_cpu_best_seconds(int (*fn)(void *arg), void *arg, int runs) {
  double best = 0;
  for (int r = 0; r < runs; r++) {
    double t0 = thread_seconds();
    if (!fn(arg)) return 0;
    double dt = thread_seconds() - t0;
    if (dt > 0 && (best == 0 || dt < best)) best = dt;
  }
  return best;
}

const dl_cpu *dl_cpu_info(void) {
  pthread_once(&cpu_once, probe);
  return &cpu;
}
