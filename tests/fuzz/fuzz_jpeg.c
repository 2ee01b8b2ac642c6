/* fuzz_jpeg.c -- libFuzzer harness for JPEG decoding (engine/io/images.c over
 * libjpeg-turbo's TurboJPEG API); the body is fuzz_image.h. Seeds:
 * tests/fuzz/corpus/jpeg (baseline, progressive, gray, subsampled, truncated:
 * gen_image_seeds.py), dictionary tests/fuzz/dict/jpeg.dict.
 */
/* See LICENSE */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_image_one(data, size); }
