/* lua_checkpoint.c -- binds safetensors checkpoints (issue 6). */
/* See LICENSE */
#include "lua_tensor.h"

void lt_register_checkpoint(lua_State *L, int mod, int cidx) {
  (void)L;
  (void)mod;
  (void)cidx;
}
