/* lua_machine.c -- core.machine(): the CPU this process runs on and the kernel paths the
 * engine chose for it, so that runs (result.json) and benchmarks record what ran.
 *
 *   {cpu = "AMD EPYC", vendor = "AuthenticAMD", family = 25, model = 17, cores = 2,
 *    simd = {"sse4.2", "avx", "avx2", "fma", "avx512f", ...},
 *    kernels = {gemm = "avx512" | "avx2" | "portable" | "blas", gemm_gflops = {avx512 = 190, avx2 = 100},
 *               conv = "avx512" | "avx2" | "portable",
 *               winograd = true, blas = "Cooperlake",
 *               pool_spin_us = 1000, threads = 2, flush_subnormals = true},
 *    switches = {DLUA_CONV_WINOGRAD = "0", ...}}      -- the switches set in the environment
 *
 * The switches (dlua(1), docs/man/dlua.1) force a path or a mode: each is read where its choice
 * is made (core/env.h's readers); SWITCHES lists them once, with each one's check, for this
 * report and for lt_switches_error, which refuses a malformed one when the module loads.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "core/cpu.h"
#include "core/env.h"
#include "ops/conv_simd.h"
#include "ops/conv_winograd.h"
#include "ops/sgemm.h"
#include "sys/dist.h"

#include <lauxlib.h>
#include <stdlib.h>

char *openblas_get_corename(void);

static int debug_error(char *msg, size_t cap) { return dl_env_flag_error("DLUA_DEBUG", msg, cap); }

/* every environment variable that chooses a kernel path, a numeric mode or what errors show,
 * with the check that refuses a malformed value (NULL: any value; OpenBLAS reads its own) */
static const struct {
  const char *name;
  int (*error)(char *msg, size_t cap);
} SWITCHES[] = {
  {"DLUA_GEMM", dl_sgemm_env_error},
  {"DLUA_CONV_SIMD", dl_conv_simd_env_error},
  {"DLUA_CONV_WINOGRAD", dl_wino_env_error},
  {"DLUA_POOL_SPIN_US", dl_pool_env_error},
  {"DLUA_FLUSH_SUBNORMALS", dl_fp_env_error},
  {"DLUA_DIST", dl_dist_env_error},
  {"DLUA_DEBUG", debug_error},
  {"OPENBLAS_CORETYPE", NULL},
  {NULL, NULL},
};

int lt_switches_error(char *msg, size_t cap) {
  for (int i = 0; SWITCHES[i].name; i++)
    if (SWITCHES[i].error && SWITCHES[i].error(msg, cap)) return 1;
  return 0;
}


static int sys_machine(lua_State *L) {
  lt_checkargs(L, 0);
  const dl_cpu *c = dl_cpu_info();
  dl_ctx *ctx = lt_ctx(L);
  lua_createtable(L, 0, 8);
  lt_setstring(L, "cpu", c->model_name[0] ? c->model_name : "unknown");
  lt_setstring(L, "vendor", c->vendor[0] ? c->vendor : "unknown");
  lt_setinteger(L, "family", c->family);
  lt_setinteger(L, "model", c->model);
  lt_setinteger(L, "cores", c->cores);
  lua_newtable(L);
  int n = 0;
  for (int i = 0; i < DL_CPU_NFLAGS; i++) {
    if (!(c->flags >> i & 1u)) continue;
    lua_pushstring(L, dl_cpu_flag_names[i]);
    lua_rawseti(L, -2, ++n);
  }
  lua_setfield(L, -2, "simd");
  lua_createtable(L, 0, 6);
  lt_setstring(L, "gemm", dl_sgemm_path());
  lua_newtable(L);                        /* what auto measured to choose it (empty when forced) */
  static const char *const own[] = {"avx512", "avx2", NULL};
  for (int i = 0; own[i]; i++)
    if (dl_sgemm_rate(own[i]) > 0) {
      lua_pushnumber(L, dl_sgemm_rate(own[i]));
      lua_setfield(L, -2, own[i]);
    }
  lua_setfield(L, -2, "gemm_gflops");
  lt_setstring(L, "conv", dl_conv_simd_name());
  lua_pushboolean(L, dl_wino_enabled());
  lua_setfield(L, -2, "winograd");
  lt_setstring(L, "winograd_path", dl_wino_path());
  lua_newtable(L);                        /* what auto measured to choose it (empty otherwise) */
  for (int i = 0; own[i]; i++)
    if (dl_wino_probe_seconds(own[i]) > 0) {
      lua_pushnumber(L, dl_wino_probe_seconds(own[i]));
      lua_setfield(L, -2, own[i]);
    }
  lua_setfield(L, -2, "winograd_seconds");
  const char *blas = openblas_get_corename();
  lt_setstring(L, "blas", blas ? blas : "unknown");
  lt_setinteger(L, "pool_spin_us", dl_pool_spin_us(ctx->pool));
  lt_setinteger(L, "threads", ctx->threads);
  lua_pushboolean(L, dl_fp_flush());
  lua_setfield(L, -2, "flush_subnormals");
  lua_setfield(L, -2, "kernels");
  lua_newtable(L);
  for (int i = 0; SWITCHES[i].name; i++) {
    const char *v = getenv(SWITCHES[i].name);
    if (v) lt_setstring(L, SWITCHES[i].name, v);
  }
  lua_setfield(L, -2, "switches");
  return 1;
}

static const luaL_Reg machine_funcs[] = {
  {"machine", sys_machine},
  {NULL, NULL}
};

void lt_register_machine(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, machine_funcs); }
