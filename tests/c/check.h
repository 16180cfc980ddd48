/*
 * check.h — the C test programs' one assertion macro and their summary line.
 * Each test program includes it once; CHECK counts, prints a FAIL line with
 * the location and a printf-style message, and never aborts.
 */
#ifndef COLIBRI_TEST_CHECK_H
#define COLIBRI_TEST_CHECK_H

#include <stdio.h>

static int n_passed, n_failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            n_passed++;                                                    \
        } else {                                                           \
            n_failed++;                                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                    \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

#endif /* COLIBRI_TEST_CHECK_H */
