/*
 * check.h — what the C test programs share: the assertion macro (CHECK
 * counts, prints a FAIL line with the location and a printf-style message,
 * and never aborts) and the deterministic random source.
 */
#ifndef COLIBRI_TEST_CHECK_H
#define COLIBRI_TEST_CHECK_H

#include <stdint.h>
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

/* Deterministic test data: splitmix64 on *state → uniform [-0.5, 0.5). */
static inline float test_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) / 16777216.0f - 0.5f;
}

#endif /* COLIBRI_TEST_CHECK_H */
