/* cpu.h -- which CPU this process runs on: vendor, model name, family and model numbers,
 * and the SIMD extensions that choose kernels. Kernel choices read it (or the CPU's own
 * feature test) at run time; runs and benchmarks record it (dl.machine()). */
/* See LICENSE */
#ifndef DL_CPU_H
#define DL_CPU_H

/* the SIMD extensions kernels are chosen by, in the order dl_cpu_flag_names lists them */
#define DL_CPU_FLAGS(X) X(SSE4_2, "sse4.2") X(AVX, "avx") X(AVX2, "avx2") X(FMA, "fma") \
  X(AVX512F, "avx512f") X(AVX512BW, "avx512bw") X(AVX512VL, "avx512vl") X(AVX512DQ, "avx512dq") \
  X(AVX512VNNI, "avx512_vnni") X(AVX512BF16, "avx512_bf16")

#define DL_CPU_FLAG_ENUM_(id, name) DL_CPU_##id,
enum { DL_CPU_FLAGS(DL_CPU_FLAG_ENUM_) DL_CPU_NFLAGS };
#undef DL_CPU_FLAG_ENUM_

typedef struct {
  char vendor[13];        /* "GenuineIntel", "AuthenticAMD", ... ("" off x86) */
  char model_name[49];    /* the brand string, trimmed ("AMD EPYC", "Intel(R) Xeon(R) ...") */
  int family, model;      /* display family and model (with the extended fields) */
  unsigned flags;         /* bit DL_CPU_<FLAG> set when the CPU and the OS support it */
  int cores;              /* online logical CPUs */
} dl_cpu;

/* The CPU, read once (thread-safe); never NULL. */
const dl_cpu *dl_cpu_info(void);

/* The best (least) CPU time of this thread, in seconds, over runs calls of fn(arg): what the
 * kernel choices that follow a measurement (sgemm.c's paths, conv_winograd.c's instruction set)
 * time their candidates with. 0 when a call returns 0 (it could not run: no memory) or no call
 * took measurable time. */
double dl_cpu_best_seconds(int (*fn)(void *arg), void *arg, int runs);

/* the name of flag bit i (i < DL_CPU_NFLAGS), as /proc/cpuinfo spells it */
extern const char *const dl_cpu_flag_names[DL_CPU_NFLAGS];

#endif
