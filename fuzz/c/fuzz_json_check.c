/*
 * fuzz_json_check.c — libFuzzer harness for the native file's metadata checker
 * (colibri_json_check_object, csrc/core/json_check.c): any bytes, every read in bounds, and a
 * refusal names a byte inside the text and a reason. Accepted texts are checked again with
 * one byte appended after a complete object (never valid) and cut short (never valid unless
 * only whitespace was cut), so the acceptance is tested as well as the safety.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "native_file.h"

static int check(const uint8_t *data, size_t size) {
    size_t at = (size_t)-1;
    const char *what = NULL;
    /* an exact-size heap copy, so ASan sees a read one past the end */
    char *copy = malloc(size ? size : 1);
    if (!copy) abort();
    memcpy(copy, data, size);
    int ok = colibri_json_check_object(copy, size, &at, &what);
    free(copy);
    if (!ok && (what == NULL || what[0] == 0 || at > size)) abort();
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!check(data, size)) return 0;
    size_t end = size;
    while (end > 0 && (data[end - 1] == ' ' || data[end - 1] == '\n' || data[end - 1] == '\r' ||
                       data[end - 1] == '\t')) {
        end--;
    }
    if (end == 0 || data[end - 1] != '}') abort();   /* an accepted text ends with its object */
    uint8_t *more = malloc(end + 1);
    if (!more) abort();
    memcpy(more, data, end);
    more[end] = '}';
    if (check(more, end + 1)) abort();               /* a second closing brace is never valid */
    if (check(more, end - 1)) abort();               /* nor an object missing its own */
    free(more);
    return 0;
}
