/* fuzz_png.c -- libFuzzer harness for PNG decoding (engine/io/images.c over
 * libspng); the body is fuzz_image.h. Seeds: tests/fuzz/corpus/png (images
 * written by PIL in every mode, and broken ones: gen_image_seeds.py),
 * dictionary tests/fuzz/dict/png.dict.
 */
/* See LICENSE */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_image_one(data, size); }
