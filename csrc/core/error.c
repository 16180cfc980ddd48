/*
 * error.c — the thread-local "last error" line and the library version.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

#define COLIBRI_ERROR_MAX 512

static __thread char colibri_last_error_buf[COLIBRI_ERROR_MAX];

int colibri_error_set(int status, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(colibri_last_error_buf, sizeof colibri_last_error_buf, fmt, args);
    va_end(args);
    return status;
}

COLIBRI_API const char *colibri_last_error(void) {
    return colibri_last_error_buf;
}

COLIBRI_API int colibri_api_version(void) {
    return COLIBRI_API_VERSION;
}
