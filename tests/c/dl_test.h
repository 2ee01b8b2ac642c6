/* dl_test.h -- the tiny check harness of the C unit tests. */
/* See LICENSE */
#ifndef DL_TEST_H
#define DL_TEST_H

#include <math.h>
#include <stdio.h>

static int dl_test_failed;

#define DL_CHECK(c) do { if (!(c)) { dl_test_failed++; \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)
#define DL_CHECK_CLOSE(a, b, tol) do { double a_ = (a), b_ = (b); \
    if (!(fabs(a_ - b_) <= (tol))) { dl_test_failed++; \
      fprintf(stderr, "%s:%d: %s = %.9g, %s = %.9g, |diff| %.3g > %.3g\n", __FILE__, __LINE__, \
              #a, a_, #b, b_, fabs(a_ - b_), (double)(tol)); } } while (0)
#define DL_TEST_END() do { if (dl_test_failed) fprintf(stderr, "%d checks failed\n", dl_test_failed); \
    return dl_test_failed != 0; } while (0)

#endif
