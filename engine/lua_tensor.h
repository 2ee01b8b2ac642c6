/* lua_tensor.h -- the binding helpers' header before the split of issue 16;
 * kept so that binding files written against it still build. New code
 * includes lua_aux.h (the one header of the binding layer) directly.
 */
/* See LICENSE */
#ifndef DL_LUA_TENSOR_H
#define DL_LUA_TENSOR_H

#include "lua_aux.h"

/* the old spelling: fn is no longer needed, luaL_argerror finds the name */
#define lt_checkint(L, i, fn, what) lt_checkinteger((L), (i), (what))

#endif
